// Package llmtest is a scripted OpenAI-compatible HTTP server for tests.
//
// It speaks the real wire protocol of the Chat Completions API — a model
// list on GET /v1/models and server-sent `chat.completion.chunk` frames on
// POST /v1/chat/completions with `stream: true`, and scripted vectors on
// POST /v1/embeddings (WithEmbeddings, Concepts) — so production code can be
// tested with its real HTTP client (go-openai) unchanged. Each request
// consumes one scripted Response (or is answered by a handler function);
// every request is recorded with its decoded body and headers, and a request
// whose client went away is reported as cancelled.
package llmtest
