package llmtest

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func postEmbeddings(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/embeddings", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func TestEmbeddingsWireShape(t *testing.T) {
	s := start(t, WithEmbeddings(Concepts([]string{"dog", "puppy"}, []string{"invoice"})))
	st, out := postEmbeddings(t, s.URL(), `{"model":"text-embedding-3-small","input":["my puppy","a dog","the invoice"]}`)
	if st != 200 || out["object"] != "list" || out["model"] != "text-embedding-3-small" {
		t.Fatalf("%d %v", st, out)
	}
	data := out["data"].([]any)
	if len(data) != 3 {
		t.Fatalf("data %v", data)
	}
	vec := func(i int) []float64 {
		d := data[i].(map[string]any)
		if d["object"] != "embedding" || d["index"] != float64(i) {
			t.Fatalf("item %d = %v", i, d)
		}
		var v []float64
		for _, f := range d["embedding"].([]any) {
			v = append(v, f.(float64))
		}
		return v
	}
	dot := func(a, b []float64) (s float64) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	puppy, dog, invoice := vec(0), vec(1), vec(2)
	if math.Abs(dot(puppy, dog)-1) > 1e-6 || math.Abs(dot(puppy, invoice)) > 1e-6 || math.Abs(dot(invoice, invoice)-1) > 1e-6 {
		t.Errorf("puppy·dog %v, puppy·invoice %v", dot(puppy, dog), dot(puppy, invoice))
	}
	reqs := s.EmbeddingRequests()
	if len(reqs) != 1 || !slices.Equal(reqs[0].EmbeddingInputs(), []string{"my puppy", "a dog", "the invoice"}) {
		t.Errorf("recorded %v", reqs)
	}
	// A single string input is one text; unrelated texts are orthogonal.
	_, one := postEmbeddings(t, s.URL(), `{"model":"m","input":"weather report"}`)
	_, two := postEmbeddings(t, s.URL(), `{"model":"m","input":"lunch menu"}`)
	a := one["data"].([]any)[0].(map[string]any)["embedding"].([]any)
	b := two["data"].([]any)[0].(map[string]any)["embedding"].([]any)
	var d float64
	for i := range a {
		d += a[i].(float64) * b[i].(float64)
	}
	if d != 0 {
		t.Errorf("unrelated texts dot %v", d)
	}
}

func TestEmbeddingsAbsentByDefault(t *testing.T) {
	s := start(t)
	if st, out := postEmbeddings(t, s.URL(), `{"model":"m","input":"x"}`); st != 404 || out["error"] == nil {
		t.Errorf("%d %v", st, out)
	}
	s.SetEmbeddings(func(string, string) []float32 { return []float32{1} })
	if st, _ := postEmbeddings(t, s.URL(), `{"model":"m","input":"x"}`); st != 200 {
		t.Errorf("after SetEmbeddings: %d", st)
	}
	if st, _ := postEmbeddings(t, s.URL(), `{"model":"m"}`); st != 400 {
		t.Errorf("no input: %d", st)
	}
}
