package protocol

// The texts that tell a user how to connect a model. They name only what
// this core has: the environment variables and flags of `waggle serve` and
// `<data-dir>/config.json` (the original sent users to a "Settings > API
// Keys" screen that does not exist here).
const (
	// ModelSetupHint ends the echo-mode reply and the "requires AI" notice.
	// It points at what exists here: the model server's URL (a flag) and
	// the vault, where the desktop app saves the key (POST /api/vault). At
	// most 13 words, as the original's hint: echo mode streams one token
	// per word, and the reply stays within the publisher's window.
	ModelSetupHint = "To get AI replies, set WAGGLE_LLM_URL and save any key at /api/vault."
	// ModelChoiceHint says how to choose the model a turn uses.
	ModelChoiceHint = "Choose one it serves with --model (WAGGLE_MODEL) or \"defaultModel\" in config.json."
)

// EchoText is the reply of a turn with no model server reachable: the
// original's echo-mode reply (reference §1.8) with a setup hint that names
// what exists here.
func EchoText(message string) string {
	return "**Waggle is running in local mode** (no LLM proxy connected).\n\nYour message: \"" + message + "\"\n\n" + ModelSetupHint
}

// RequiresAIText is the notice of a slash command that needs a model when
// none is reachable; command is its first word ("/research").
func RequiresAIText(command string) string {
	return "**" + command + " requires AI** — This command needs a working LLM connection.\n\n" + ModelSetupHint
}
