package frames

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// DefaultEmbeddingModel is the embedding model used unless config.json's
// embeddingModel names another ("" turns vectors off).
const DefaultEmbeddingModel = "text-embedding-3-small"

// Embedder turns texts into vectors, one per text in order.
type Embedder interface {
	Embed(ctx context.Context, model string, texts []string) ([][]float32, error)
}

// OpenAIEmbedder asks an OpenAI-compatible server (POST {url}/embeddings).
type OpenAIEmbedder struct {
	client *openai.Client
}

// NewOpenAIEmbedder returns an embedder for the base URL (including /v1)
// and bearer key (may be empty).
func NewOpenAIEmbedder(url, apiKey string) *OpenAIEmbedder {
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = url
	return &OpenAIEmbedder{client: openai.NewClientWithConfig(cfg)}
}

// Embed implements Embedder.
func (e *OpenAIEmbedder) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	rep, err := e.client.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{Input: texts, Model: openai.EmbeddingModel(model)})
	if err != nil {
		return nil, fmt.Errorf("frames: embeddings (%s, %d texts): %w", model, len(texts), err)
	}
	out := make([][]float32, len(texts))
	for _, d := range rep.Data {
		if d.Index < 0 || d.Index >= len(out) {
			return nil, fmt.Errorf("frames: embeddings: index %d of %d texts", d.Index, len(texts))
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("frames: embeddings: no vector for text %d", i)
		}
	}
	return out, nil
}

// memoryConfig is the memory part of <data-dir>/config.json, re-read when
// the file changes (checked at most once a second).
type memoryConfig struct {
	path string

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	model   string
}

func newMemoryConfig(dataDir string) *memoryConfig {
	return &memoryConfig{path: filepath.Join(dataDir, "config.json"), model: DefaultEmbeddingModel}
}

// Model is the current embedding model ("" when vectors are off).
func (c *memoryConfig) Model() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.checked.IsZero() && now.Sub(c.checked) < time.Second {
		return c.model
	}
	c.checked = now
	fi, err := os.Stat(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		c.model, c.mod, c.size = DefaultEmbeddingModel, time.Time{}, 0
		return c.model
	}
	if err != nil || fi.ModTime().Equal(c.mod) && fi.Size() == c.size {
		return c.model
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return c.model
	}
	var f struct {
		EmbeddingModel *string `json:"embeddingModel"`
	}
	// A half-saved edit keeps the last model.
	if json.Unmarshal(data, &f) != nil {
		return c.model
	}
	c.mod, c.size = fi.ModTime(), fi.Size()
	c.model = DefaultEmbeddingModel
	if f.EmbeddingModel != nil {
		c.model = *f.EmbeddingModel
	}
	return c.model
}
