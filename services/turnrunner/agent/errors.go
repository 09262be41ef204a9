package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
)

// User-facing error texts of a failed turn (reference §1.9 item 11).
const (
	MsgUnreachable  = "Could not reach the AI model server. Check that it is running at the address WAGGLE_LLM_URL names."
	MsgUnauthorized = "The model server refused the API key. Save a valid one in the app's Vault (POST /api/vault) or set WAGGLE_LLM_API_KEY."
	MsgTimeout      = "The request timed out. The model may be overloaded — try again in a moment."
	MsgTooLong      = "The conversation is too long for the model. Try clearing the chat and starting fresh."
	MsgGeneric      = "Something went wrong. Try sending your message again."
)

// FriendlyError turns a turn's failure into the message shown to the user.
// Unlike the original it never passes a raw error text through: anything it
// does not recognise becomes MsgGeneric, so no internal detail leaks.
func FriendlyError(err error) string {
	if err == nil {
		return MsgGeneric
	}
	text := strings.ToLower(err.Error())
	status := statusOf(err)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(text, "econnrefused") || strings.Contains(text, "connection refused"):
		return MsgUnreachable
	case status == http.StatusUnauthorized || strings.Contains(text, "401") || strings.Contains(text, "unauthorized"):
		return MsgUnauthorized
	case isTimeout(err) || strings.Contains(text, "timeout") || strings.Contains(text, "etimedout"):
		return MsgTimeout
	case isModelNotFound(err, status, text):
		return modelNotFoundText(err)
	case strings.Contains(text, "context_length") || strings.Contains(text, "too many tokens") || apiCode(err) == "context_length_exceeded":
		return MsgTooLong
	default:
		return MsgGeneric
	}
}

// isModelNotFound recognises a model server's "no such model" answer:
// OpenAI's 404 model_not_found, Ollama's 404 `model "x" not found`,
// LiteLLM's and vLLM's 404/400 "model ... does not exist".
func isModelNotFound(err error, status int, text string) bool {
	if apiCode(err) == "model_not_found" {
		return true
	}
	return (status == http.StatusNotFound || status == http.StatusBadRequest) && strings.Contains(text, "model") &&
		(strings.Contains(text, "not found") || strings.Contains(text, "does not exist"))
}

// modelNotFoundText names the model that is missing and how to choose
// another; the model's name is the user's own configuration, not an
// internal detail.
func modelNotFoundText(err error) string {
	var me *ModelError
	if errors.As(err, &me) && me.Model != "" {
		return fmt.Sprintf("The model %q is not available on the model server. %s", me.Model, protocol.ModelChoiceHint)
	}
	return "The model this turn asked for is not available on the model server. " + protocol.ModelChoiceHint
}

// statusOf is the HTTP status of a model error, 0 when it has none.
func statusOf(err error) int {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

func apiCode(err error) string {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		if s, ok := apiErr.Code.(string); ok {
			return s
		}
	}
	return ""
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryable reports whether a failed model call may be tried again: rate
// limits, gateway/server errors, timeouts and refused connections.
func retryable(err error) bool {
	switch statusOf(err) {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return isTimeout(err) || errors.Is(err, syscall.ECONNREFUSED)
}

// failureLabel names a failure for notices: its status code, else "timeout"
// (as the original labels every status-less failure).
func failureLabel(err error) string {
	if s := statusOf(err); s != 0 {
		return strconv.Itoa(s)
	}
	return "timeout"
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// ModelError is a model call that failed; the runner logs it and shows
// FriendlyError to the user.
type ModelError struct {
	Model string
	Err   error
	// secrets are cut out of Error(): a server may echo the key it refused.
	secrets []string
}

func (e *ModelError) Error() string {
	return redact(fmt.Sprintf("agent: model %s: %v", e.Model, e.Err), e.secrets)
}

func (e *ModelError) Unwrap() error { return e.Err }
