package llmtest

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
)

// EmbedFunc gives the vector of one input text of an embeddings request
// (model is the request's). A nil vector fails the request with a 400.
type EmbedFunc func(model, input string) []float32

// WithEmbeddings serves POST /v1/embeddings with fn. Without it the route
// answers 404 as a server without an embedding model does.
func WithEmbeddings(fn EmbedFunc) Option {
	return func(s *Server) { s.embed = fn }
}

// SetEmbeddings replaces (nil: removes) the embeddings function.
func (s *Server) SetEmbeddings(fn EmbedFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embed = fn
}

// EmbeddingRequests returns the recorded embeddings requests.
func (s *Server) EmbeddingRequests() []*Request {
	var out []*Request
	for _, r := range s.Requests() {
		if r.Path == "/v1/embeddings" {
			out = append(out, r)
		}
	}
	return out
}

// EmbeddingInputs are the texts of an embeddings request, in order.
func (r *Request) EmbeddingInputs() []string {
	var body struct {
		Input any `json:"input"`
	}
	if json.Unmarshal(r.RawBody, &body) != nil {
		return nil
	}
	switch in := body.Input.(type) {
	case string:
		return []string{in}
	case []any:
		out := make([]string, 0, len(in))
		for _, v := range in {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Concepts is a scripted embedding model for tests: each concept is an
// axis, and a text's vector is the normalised sum of the axes of the
// concepts whose words it contains (case-insensitive substrings). A text
// with none of them points along one of 256 extra axes chosen by a hash of
// the text, so it is orthogonal to every concept and (but for rare
// collisions) to other such texts. Two texts sharing no word but a concept
// ("puppy" and "dog" under one concept) are thereby close.
func Concepts(concepts ...[]string) EmbedFunc {
	const spare = 256
	dims := len(concepts) + spare
	return func(_, input string) []float32 {
		v := make([]float32, dims)
		lower := strings.ToLower(input)
		hit := false
		for i, words := range concepts {
			for _, w := range words {
				if strings.Contains(lower, strings.ToLower(w)) {
					v[i]++
					hit = true
					break
				}
			}
		}
		if !hit {
			h := fnv.New32a()
			h.Write([]byte(lower))
			v[len(concepts)+int(h.Sum32()%spare)] = 1
		}
		var n float64
		for _, f := range v {
			n += float64(f) * float64(f)
		}
		n = math.Sqrt(n)
		for i := range v {
			v[i] = float32(float64(v[i]) / n)
		}
		return v
	}
}

func (s *Server) serveEmbeddings(w http.ResponseWriter, req *Request) {
	s.mu.Lock()
	fn := s.embed
	s.mu.Unlock()
	if fn == nil {
		writeError(w, http.StatusNotFound, &APIError{Message: "llmtest: no embedding model", Type: "invalid_request_error"})
		return
	}
	model, _ := req.Body["model"].(string)
	inputs := req.EmbeddingInputs()
	if len(inputs) == 0 {
		writeError(w, http.StatusBadRequest, &APIError{Message: "input is required", Type: "invalid_request_error"})
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	type usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}
	rep := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  usage  `json:"usage"`
	}{Object: "list", Data: []item{}, Model: model}
	for i, in := range inputs {
		v := fn(model, in)
		if v == nil {
			writeError(w, http.StatusBadRequest, &APIError{Message: "llmtest: no vector for input", Type: "invalid_request_error"})
			return
		}
		rep.Data = append(rep.Data, item{Object: "embedding", Index: i, Embedding: v})
		rep.Usage.PromptTokens += len(strings.Fields(in))
	}
	rep.Usage.TotalTokens = rep.Usage.PromptTokens
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}
