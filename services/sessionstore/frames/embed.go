package frames

import (
	"context"
	"encoding/json"
	"fmt"

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

// embeddingModel reads the embedding model from the settings:
// embeddingModel, DefaultEmbeddingModel when absent, "" (vectors off)
// when set so. A value that is not a string keeps the default.
type embeddingModel struct {
	setting func(key string) json.RawMessage
}

// Model is the current embedding model ("" when vectors are off).
func (c embeddingModel) Model() string {
	if c.setting == nil {
		return DefaultEmbeddingModel
	}
	raw := c.setting("embeddingModel")
	var model string
	if raw == nil || string(raw) == "null" || json.Unmarshal(raw, &model) != nil {
		return DefaultEmbeddingModel
	}
	return model
}
