// Package retrieval is the one-shot structured retrieval agent behind
// POST /api/agent/run (contract §8, reference §5.4): it answers one
// question by letting the model call a single `retrieve` tool over the
// workspace's memory and sessions for a bounded number of steps, and
// reports the run as the events started, progress…, finalized or error,
// and always done last.
//
// The loop is step-based: a step is one streamed model call. When the
// model asks for retrievals the step runs up to MaxRetrievalsPerStep of
// them, feeds the results back as tool messages and the next step begins;
// a step whose answer has no tool call ends the run with that answer. A
// run that spends MaxSteps steps without such an answer is exhausted: it
// finalises with loopExhausted true and the last non-empty text the model
// wrote (possibly empty).
//
// The package owns no transport: the caller supplies a Searcher (the turn
// runner's bus-backed memory and session search) and an Emitter (the run's
// event stream).
//
// Where this differs from the original:
//   - An error event carries a friendly message (agent.FriendlyError), never
//     a raw error text; a cancelled run reports "agent run cancelled".
//   - Models that go-openai treats as reasoning models (o1/o3/o4/gpt-5…)
//     get the token cap as max_completion_tokens and no temperature, since
//     the client library rejects max_tokens and custom temperatures for
//     them before any request is sent.
//   - <think> blocks are removed from the assistant text that is fed back
//     to the model between steps, not only from the final answer.
//   - The prompt-shape system prompts are this package's own short texts;
//     the original's are not part of the reference.
package retrieval
