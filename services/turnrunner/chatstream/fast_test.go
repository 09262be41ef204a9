package chatstream

import (
	"encoding/json"
	"testing"
)

// slowDelta is what Read makes of a chunk through encoding/json: the
// content of the index-0 choices, and whether the chunk carries anything
// else Read uses (tool calls, usage).
func slowDelta(raw []byte) (content string, other bool, err error) {
	var c chunk
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", false, err
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		content += ch.Delta.Content
		other = other || len(ch.Delta.ToolCalls) > 0
	}
	return content, other || c.Usage != nil, nil
}

var fastSeeds = []string{
	`{"id":"x","object":"chat.completion.chunk","created":1733,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	`{"choices":[{"index":1,"delta":{"content":"no"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\nb"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"héllo ✓"}}]}`,
	`{"choices":[{"index":0,"delta":{"Content":"case"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
	`{"Choices":[{"index":0,"delta":{"content":"x"}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}]} x`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"created":01}`,
	`{"choices":[{"index":0.0,"delta":{"content":"x"}}]}`,
	` { "choices" : [ { "delta" : { "content" : "sp" } , "index" : 0 } ] } `,
	`{"choices":[{"index":0,"delta":{"content":null}}]}`,
	`{"choices":[{"index":0,"delta":{"content":5}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x","tool_calls":null}}],"n":-1.5e+3,"t":true,"f":false}`,
}

// TestFastDelta: the common chunk takes the fast path, and every seed
// means the same on both paths.
func TestFastDelta(t *testing.T) {
	if d, ok := fastDelta([]byte(fastSeeds[0])); !ok || d != "tok " {
		t.Fatalf("fastDelta(common chunk) = %q, %v; want \"tok \", true", d, ok)
	}
	for _, s := range fastSeeds {
		sameAsSlow(t, []byte(s))
	}
}

// FuzzFastDelta: whatever the fast path accepts, encoding/json accepts
// and reads as the same content with nothing else in it.
func FuzzFastDelta(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(sameAsSlow)
}

func sameAsSlow(t *testing.T, raw []byte) {
	d, ok := fastDelta(raw)
	if !ok {
		return
	}
	want, other, err := slowDelta(raw)
	if err != nil || other || d != want {
		t.Fatalf("%s: fast %q; encoding/json %q, other %v, err %v", raw, d, want, other, err)
	}
}

// BenchmarkChunkDecode compares the fast path with encoding/json on the
// chunk a streamed token arrives in.
func BenchmarkChunkDecode(b *testing.B) {
	raw := []byte(fastSeeds[0])
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastDelta(raw); !ok {
				b.Fatal("not fast")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c chunk
			if err := json.Unmarshal(raw, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestReadRefusesMalformedChunk: a chunk encoding/json refuses (malformed,
// or a content that is not a string) still ends the reply with an error,
// keeping the text that came before it, as go-openai's Recv did.
func TestReadRefusesMalformedChunk(t *testing.T) {
	for _, bad := range []string{delta(`{"content":"x"`), delta(`{"content":5}`)} {
		s := open(t, serve(t, []string{delta(`{"content":"ok"}`), bad, delta(`{"content":"never"}`)}))
		rep, err := Read(s, nil)
		s.Close()
		if err == nil || rep.Content != "ok" {
			t.Errorf("chunk %s: Read = %q, %v; want \"ok\" and an error", bad, rep.Content, err)
		}
	}
}
