package protocol

import (
	"encoding/json"
	"strings"
	"time"
)

// The desktop app's settings and secrets. config.json in the session
// store's data dir holds the settings (the same file an operator may edit
// by hand); the vault holds API keys and tokens, encrypted at rest. Only
// the session store reads or writes either; the gateway and the runners
// ask it over the bus.

// SettingsDoc is config.json as the store last read it.
type SettingsDoc struct {
	// Doc is the last good content (a JSON object; {} when there is no
	// file). Secrets in it (apiKeys) are the runner's: the gateway never
	// shows them.
	Doc json.RawMessage `json:"doc"`
	// Error says why the file on disk is not what Doc holds (it does not
	// parse: line and column), "" when it is.
	Error string `json:"error,omitempty"`
}

// SettingsPatch changes top-level fields of config.json: Set replaces or
// adds a field, Remove deletes one. Only SettingsFields may be named.
type SettingsPatch struct {
	Set    map[string]json.RawMessage `json:"set,omitempty"`
	Remove []string                   `json:"remove,omitempty"`
}

// SettingsChanged says what changed (SettingsChanges).
type SettingsChanged struct {
	// Vault is true when a secret changed, false for config.json.
	Vault bool `json:"vault,omitempty"`
}

// VaultEntry is one secret as a listing shows it: never its value.
type VaultEntry struct {
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// VaultListRequest lists the secrets of Team ("" = the local vault).
type VaultListRequest struct {
	Team string `json:"team,omitempty"`
}

// VaultListReply lists secrets by name.
type VaultListReply struct {
	Secrets []VaultEntry `json:"secrets"`
}

// VaultSetRequest stores Value under Name in Team's vault.
type VaultSetRequest struct {
	Team  string `json:"team,omitempty"`
	Name  string `json:"name"`
	Value string `json:"value"`
	Type  string `json:"type,omitempty"`
}

// VaultNameRequest names one secret.
type VaultNameRequest struct {
	Team string `json:"team,omitempty"`
	Name string `json:"name"`
}

// VaultSecret is one secret with its value (reveal only).
type VaultSecret struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Type  string `json:"type"`
}

// ModelServerStatus is a probe of the model server's /models.
type ModelServerStatus struct {
	Reachable bool      `json:"reachable"`
	CheckedAt time.Time `json:"checkedAt"`
	Detail    string    `json:"detail,omitempty"`
	// Code is the HTTP status of a non-2xx answer.
	Code   int      `json:"code,omitempty"`
	Models []string `json:"models,omitempty"`
}

// ModelKeyRequest asks for the vault's key for Model, for a turn in
// Workspace: the store reads the workspace's team itself and answers from
// that team's vault only ("" workspace, or one of no team: the local
// vault).
type ModelKeyRequest struct {
	Model     string `json:"model"`
	Workspace string `json:"workspace,omitempty"`
}

// ModelKeyReply is the key ("" when the vault has none), the entry it
// came from and the team whose vault answered ("" = the local one).
type ModelKeyReply struct {
	Key   string `json:"key,omitempty"`
	Entry string `json:"entry,omitempty"`
	Team  string `json:"team,omitempty"`
}

// SearchKeyRequest asks for the key of web search Provider ("brave",
// "tavily") in Team's vault ("" is the local vault).
type SearchKeyRequest struct {
	Team     string `json:"team,omitempty"`
	Provider string `json:"provider"`
}

// VaultSearchKeyNames lists the vault entries that may hold provider's
// API key, in order of preference: the names the desktop app saves
// (Settings > Vault: TAVILY_API_KEY, BRAVE_API_KEY), then the provider's
// own name. Nil for a provider that takes no key.
func VaultSearchKeyNames(provider string) []string {
	switch provider {
	case "brave":
		return []string{"BRAVE_API_KEY", "brave"}
	case "tavily":
		return []string{"TAVILY_API_KEY", "tavily"}
	}
	return nil
}

// Limits of a vault entry.
const (
	MaxVaultNameLength  = 128
	MaxVaultValueLength = 16 << 10
)

// VaultLLMKeyName is the vault entry that plays WAGGLE_LLM_API_KEY's role:
// the bearer key of the configured model server, whatever the model.
const VaultLLMKeyName = "WAGGLE_LLM_API_KEY"

// vaultProviderKeys are the vault entries of each provider, in the names
// the original app saves ("openai") and the environment's ("OPENAI_API_KEY").
var vaultProviderKeys = []struct {
	prefixes []string
	names    []string
}{
	{[]string{"claude", "anthropic/"}, []string{"anthropic", "ANTHROPIC_API_KEY"}},
	{[]string{"gpt", "o1", "o3", "o4", "chatgpt", "openai/", "text-embedding"}, []string{"openai", "OPENAI_API_KEY"}},
	{[]string{"gemini", "google/", "gemini/"}, []string{"google", "GEMINI_API_KEY", "GOOGLE_API_KEY"}},
	{[]string{"mistral", "codestral", "mistral/"}, []string{"mistral", "MISTRAL_API_KEY"}},
	{[]string{"deepseek"}, []string{"deepseek", "DEEPSEEK_API_KEY"}},
	{[]string{"grok", "xai/"}, []string{"xai", "XAI_API_KEY"}},
	{[]string{"qwen", "dashscope/"}, []string{"alibaba", "DASHSCOPE_API_KEY"}},
	{[]string{"openrouter/"}, []string{"openrouter", "OPENROUTER_API_KEY"}},
}

// VaultModelKeyNames lists, in order of preference, the vault entries
// whose value may be the model server's key for model: VaultLLMKeyName
// first (it names the server, not a provider), then the entries of the
// model's provider, then every other provider's (a desktop user who saved
// one key for a proxy that serves several providers still gets answers).
func VaultModelKeyNames(model string) []string {
	m := strings.ToLower(model)
	names := []string{VaultLLMKeyName}
	var rest []string
	for _, p := range vaultProviderKeys {
		match := false
		for _, pre := range p.prefixes {
			if strings.HasPrefix(m, pre) {
				match = true
				break
			}
		}
		if match {
			names = append(names, p.names...)
		} else {
			rest = append(rest, p.names...)
		}
	}
	return append(names, rest...)
}

// ValidVaultName reports whether name may name a secret: 1 to
// MaxVaultNameLength characters of letters, digits and "_-.:".
func ValidVaultName(name string) bool {
	if name == "" || len(name) > MaxVaultNameLength {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.', r == ':':
		default:
			return false
		}
	}
	return true
}

// Workspace file operations (FilesRequest.Op).
const (
	FilesList   = "list"
	FilesRead   = "read"
	FilesWrite  = "write"
	FilesMkdir  = "mkdir"
	FilesDelete = "delete"
	FilesMove   = "move"
	FilesCopy   = "copy"
)

// MaxFileTransfer bounds a file uploaded or downloaded through the files
// routes: its bytes cross the bus base64-encoded in one message, within
// the embedded server's 8 MiB payload.
const MaxFileTransfer = 5 << 20

// FilesRequest is one operation on a workspace's files directory, under
// the file tools' confinement rules. Paths are relative to the directory
// ("/" and "" are its root).
type FilesRequest struct {
	Workspace string `json:"workspace"`
	Op        string `json:"op"`
	Path      string `json:"path,omitempty"`
	// To is the destination of move and copy.
	To string `json:"to,omitempty"`
	// Data is the content of write.
	Data []byte `json:"data,omitempty"`
}

// FileEntry is one file or directory, in the original's shape.
type FileEntry struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Type       string `json:"type"` // "file" or "directory"
	Size       int64  `json:"size"`
	MimeType   string `json:"mimeType,omitempty"`
	ModifiedAt string `json:"modifiedAt,omitempty"`
}

// FilesReply is the answer to a FilesRequest: Entries for list, Entry for
// write, mkdir, move and copy, Data and Entry for read.
type FilesReply struct {
	Entries []FileEntry `json:"entries,omitempty"`
	Entry   *FileEntry  `json:"entry,omitempty"`
	Data    []byte      `json:"data,omitempty"`
}

// Notification categories.
const (
	NotifyAgent    = "agent"
	NotifyApproval = "approval"
	NotifyWorkflow = "workflow"
)

// Notification is one desktop notification (Notifications): a turn that
// finished while no client watched it, an approval waiting with no client
// attached, a workflow pattern captured. Gateways keep a bounded history
// and stream them (/api/notifications/*).
type Notification struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // always "notification"
	Title     string `json:"title"`
	Body      string `json:"body"`
	Category  string `json:"category"`
	Timestamp string `json:"timestamp"`
	Workspace string `json:"workspaceId,omitempty"`
	Session   string `json:"sessionId,omitempty"`
	// User is the team-server user it is for ("" locally): only they see
	// it, and gateways do not show the field.
	User string `json:"user,omitempty"`
	// ActionURL is where the app goes when it is clicked.
	ActionURL string `json:"actionUrl,omitempty"`
}
