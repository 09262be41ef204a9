package openapi

import (
	"net/http"

	"github.com/waggle-os/core/libs/protocol"
)

// desktopRoutes are the desktop app's routes (docs/desktop.md): the vault,
// settings, the model server's models and the tier.
func desktopRoutes() []op {
	const get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
	bad, forbidden, notFound, conflict := http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusConflict
	teamQuery := queryID("team", "the team whose vault (required on a team server, refused locally)")
	nameParam := Parameter{Name: "name", In: "path", Required: true, Description: "the secret's name",
		Schema: &Schema{Type: "string", Pattern: "^[A-Za-z0-9_.:-]{1,128}$"}}
	vaultEntry := object(req("name", str()), req("type", str()), req("updatedAt", str()), req("isCommon", boolean()))
	suggestion := object(req("name", str()), req("type", str()), req("label", str()))
	settings := object(req("defaultModel", str()), req("fallbackModel", anyValue("a model or null")),
		req("budgetModel", anyValue("a model or null")), req("budgetThreshold", number()),
		req("providers", &Schema{Type: "object", Description: "provider name → {apiKey: \"****\", models}: the vault's entries, never a value"}),
		opt("dataDir", strDesc("local mode only")), req("litellmUrl", str()), req("dailyBudget", anyValue("dollars or null")),
		req("budgetHardCap", boolean()), req("onboardingCompleted", boolean()),
		opt("configError", strDesc("why config.json on disk is not in force (line and column); the last good version is")))
	permissions := object(req("defaultAutonomy", &Schema{Type: "string", Enum: []any{"normal", "trusted", "yolo"}}),
		req("externalGates", arrayOf(str())), req("workspaceOverrides", &Schema{Type: "object"}))
	wsParam := pathParam("id", "the workspace id")
	filesSubject := []string{protocol.WorkspaceFiles.Subject}
	fileEntry := object(req("name", str()), req("path", strDesc("from the workspace root, starting with /")),
		req("type", &Schema{Type: "string", Enum: []any{"file", "directory"}}), req("size", integer()),
		opt("mimeType", str()), opt("modifiedAt", str()))
	notifyID := pathParam("id", "the notification id")
	notifyParams := []Parameter{query("unread", "true: only unread ones", str()), query("limit", "default 100, at most 200", integer())}
	notifyList := object(req("notifications", arrayOf(object(req("id", str()), req("type", constant("notification")), req("title", str()),
		req("body", str()), req("category", str()), req("timestamp", str()), opt("workspaceId", str()), opt("sessionId", str()),
		req("read", boolean())))), req("count", integer()), req("unread", integer()))
	settingsSubjects := []string{protocol.GetSettings.Subject, protocol.ListVault.Subject}
	return []op{
		{method: get, path: "/api/vault", id: "listVault", tag: "desktop",
			summary: "The vault's secrets by name and type (never a value), with suggested names (on a team server: ?team=, its admins)",
			params:  []Parameter{teamQuery},
			ok: object(req("secrets", arrayOf(vaultEntry)), req("suggestedKeys", arrayOf(str())),
				req("suggestedSecrets", arrayOf(object(req("category", str()), req("items", arrayOf(suggestion)))))),
			errs: []int{bad, forbidden}, subjects: []string{protocol.ListVault.Subject}},
		{method: post, path: "/api/vault", id: "setVaultSecret", tag: "desktop",
			summary: "Save a secret, encrypted at rest (a model key applies to the next turn)", params: []Parameter{teamQuery},
			body: object(req("name", str()), req("value", str()), opt("type", str())),
			ok:   object(req("success", constant(true)), req("name", str())),
			errs: []int{bad, forbidden, conflict, http.StatusRequestEntityTooLarge}, subjects: []string{protocol.SetVault.Subject}},
		{method: del, path: "/api/vault/{name}", id: "deleteVaultSecret", tag: "desktop",
			summary: "Delete a secret", params: []Parameter{nameParam, teamQuery},
			ok:   object(req("deleted", boolean()), req("name", str())),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.DeleteVault.Subject}},
		{method: post, path: "/api/vault/{name}/reveal", id: "revealVaultSecret", tag: "desktop",
			summary: "A secret's value: the server's own page or a non-browser client only (locally: from this machine)",
			params:  []Parameter{nameParam, teamQuery},
			ok:      object(req("name", str()), req("value", str()), req("type", str())),
			errs:    []int{bad, forbidden, notFound}, subjects: []string{protocol.RevealVault.Subject}},

		{method: get, path: "/api/settings", id: "getSettings", tag: "desktop",
			summary: "The settings (config.json, as the session store reads it)", ok: settings,
			subjects: settingsSubjects},
		{method: put, path: "/api/settings", id: "putSettings", tag: "desktop",
			summary: "Change models and budget; provider keys go to the vault (operator only on a team server)",
			body: object(opt("defaultModel", str()), opt("fallbackModel", anyValue("a model, or null to remove")),
				opt("budgetModel", anyValue("a model, or null to remove")), opt("budgetThreshold", number()),
				opt("dailyBudget", anyValue("dollars, or null to remove")), opt("budgetHardCap", boolean()),
				opt("providers", &Schema{Type: "object", Description: "name → {apiKey, models?, baseUrl?}"})),
			ok: settings, errs: []int{bad, forbidden, conflict},
			subjects: []string{protocol.GetSettings.Subject, protocol.PatchSettings.Subject, protocol.ListVault.Subject, protocol.SetVault.Subject}},
		{method: patch, path: "/api/settings", id: "patchSettings", tag: "desktop",
			summary: "Change preferences (onboardingCompleted, autoSave, …); null removes one",
			body:    &Schema{Type: "object"}, ok: object(req("updated", constant(true)), req("onboardingCompleted", boolean())),
			errs: []int{bad, forbidden, conflict}, subjects: []string{protocol.PatchSettings.Subject}},
		{method: get, path: "/api/settings/permissions", id: "getPermissions", tag: "desktop",
			summary: "The app's autonomy default and tool gates", ok: permissions, subjects: []string{protocol.GetSettings.Subject}},
		{method: put, path: "/api/settings/permissions", id: "putPermissions", tag: "desktop",
			summary: "Change the app's autonomy default and tool gates (yoloMode: the legacy switch)",
			body: object(opt("defaultAutonomy", str()), opt("yoloMode", boolean()), opt("externalGates", arrayOf(str())),
				opt("workspaceOverrides", &Schema{Type: "object"})),
			ok: permissions, errs: []int{bad, forbidden, conflict},
			subjects: []string{protocol.GetSettings.Subject, protocol.PatchSettings.Subject}},
		{method: post, path: "/api/settings/test-key", id: "testKey", tag: "desktop",
			summary: "Try a key against the configured model server's /models (not saved)",
			body:    object(req("provider", str()), req("apiKey", str())),
			ok:      object(req("valid", boolean()), req("provider", str()), opt("error", str())), errs: []int{bad, forbidden}},
		{method: get, path: "/api/providers", id: "listProviders", tag: "desktop",
			summary:  "The model server (its models) and the providers whose keys the vault holds",
			ok:       object(req("providers", arrayOf(&Schema{Type: "object"})), req("search", arrayOf(&Schema{Type: "object"})), req("activeSearch", str())),
			subjects: []string{protocol.ListVault.Subject}},
		{method: get, path: "/api/litellm/models", id: "listModels", tag: "desktop",
			summary: "The models the configured model server lists ([] when it does not answer)",
			ok:      object(req("models", arrayOf(str()))), busFree: true},
		{method: get, path: "/api/litellm/status", id: "modelServerStatus", tag: "desktop",
			summary: "Whether the configured model server answers",
			ok:      object(req("running", boolean()), req("port", integer()), req("url", str()), opt("error", str())), busFree: true},
		{method: get, path: "/api/litellm/pricing", id: "modelPricing", tag: "desktop",
			summary:  "config.json's model prices, per 1K tokens",
			ok:       arrayOf(object(req("model", str()), req("inputPer1k", number()), req("outputPer1k", number()), req("provider", str()))),
			subjects: []string{protocol.GetSettings.Subject}},
		{method: get, path: "/api/workspaces/{id}/files/list", id: "listFiles", tag: "desktop",
			summary: "A directory of the workspace's files (the file tools' directory); symlinks are not listed",
			params:  []Parameter{wsParam, query("path", "the directory, \"/\" = the workspace root (default)", str())},
			ok:      arrayOf(fileEntry), errs: []int{bad, forbidden, notFound}, subjects: filesSubject},
		{method: get, path: "/api/workspaces/{id}/files/download", id: "downloadFile", tag: "desktop",
			summary: "A file's bytes, as an attachment (at most 5 MiB)", okType: "application/octet-stream", ok: strDesc("the file"),
			params: []Parameter{wsParam, query("path", "the file (required)", str())},
			errs:   []int{bad, forbidden, notFound, http.StatusRequestEntityTooLarge}, subjects: filesSubject},
		{method: post, path: "/api/workspaces/{id}/files/upload", id: "uploadFile", tag: "desktop",
			summary: "Write a file (JSON, data in base64, at most 5 MiB; or multipart/form-data: file parts and a path field, from an allowed origin, answering an array for several files); not for viewers", params: []Parameter{wsParam}, status: http.StatusCreated,
			body: object(req("path", strDesc("the directory")), req("name", strDesc("the file name")), req("data", strDesc("base64"))),
			ok:   fileEntry, errs: []int{bad, forbidden, notFound, http.StatusRequestEntityTooLarge}, subjects: filesSubject},
		{method: post, path: "/api/workspaces/{id}/files/mkdir", id: "makeDirectory", tag: "desktop",
			summary: "Create a directory (and its parents); not for viewers", params: []Parameter{wsParam}, status: http.StatusCreated,
			body: object(req("path", str())), ok: fileEntry, errs: []int{bad, forbidden, notFound}, subjects: filesSubject},
		{method: post, path: "/api/workspaces/{id}/files/delete", id: "deleteFile", tag: "desktop",
			summary: "Delete a file or a directory with its contents; not for viewers", params: []Parameter{wsParam}, status: http.StatusNoContent,
			body: object(req("path", str())), errs: []int{bad, forbidden, notFound}, subjects: filesSubject},
		{method: post, path: "/api/workspaces/{id}/files/move", id: "moveFile", tag: "desktop",
			summary: "Move or rename (the destination must not exist); not for viewers", params: []Parameter{wsParam},
			body: object(req("from", str()), req("to", str())), ok: fileEntry, errs: []int{bad, forbidden, notFound, conflict}, subjects: filesSubject},
		{method: post, path: "/api/workspaces/{id}/files/copy", id: "copyFile", tag: "desktop",
			summary: "Copy a file or directory (the destination must not exist); not for viewers", params: []Parameter{wsParam},
			body: object(req("from", str()), req("to", str())), ok: fileEntry, errs: []int{bad, forbidden, notFound, conflict}, subjects: filesSubject},
		{method: get, path: "/api/jobs/{id}", id: "getJob", tag: "desktop",
			summary: "Poll a background job (an agent-group run); completedAt and output repeat finishedAt and result",
			params:  []Parameter{pathParam("id", "the job id")}, ok: ref("GroupJob"),
			errs: []int{notFound}, subjects: []string{protocol.GetGroupJob.Subject}},
		{method: post, path: "/api/jobs/{id}/cancel", id: "cancelJob", tag: "desktop",
			summary: "Cancel a queued or running job: its member turns stop, steps not started are skipped (409 once it has ended; on a team server not for viewers)",
			params:  []Parameter{pathParam("id", "the job id")}, ok: object(req("cancelled", constant(true)), req("jobId", str())),
			errs: []int{forbidden, notFound, conflict}, subjects: []string{protocol.GetGroupJob.Subject, protocol.CancelGroupJob.Subject, protocol.Authorize.Subject}},
		{method: get, path: "/api/notifications/stream", id: "notificationStream", tag: "desktop",
			summary: "Notifications as they come (SSE, unnamed events: {type: connected} first, then each notification)",
			okType:  "text/event-stream", ok: strDesc("data: <notification JSON> per event"), busFree: true},
		{method: get, path: "/api/notifications", id: "listNotifications", tag: "desktop",
			summary: "This gateway's recent notifications, newest first (the last 200 per user)", params: notifyParams, ok: notifyList, errs: []int{bad}, busFree: true},
		{method: get, path: "/api/notifications/history", id: "notificationHistory", tag: "desktop",
			summary: "Same as GET /api/notifications", params: notifyParams, ok: notifyList, errs: []int{bad}, busFree: true},
		{method: post, path: "/api/notifications/{id}/read", id: "markNotificationRead", tag: "desktop",
			summary: "Mark one notification read", params: []Parameter{notifyID}, ok: object(req("read", constant(true)), req("id", str())), errs: []int{notFound}, busFree: true},
		{method: patch, path: "/api/notifications/{id}/read", id: "markNotificationReadPatch", tag: "desktop",
			summary: "Same as POST", params: []Parameter{notifyID}, ok: object(req("read", constant(true)), req("id", str())), errs: []int{notFound}, busFree: true},
		{method: post, path: "/api/notifications/read-all", id: "markAllNotificationsRead", tag: "desktop",
			summary: "Mark every notification read", ok: object(req("markedRead", integer())), busFree: true},
		{method: get, path: "/api/tier", id: "getTier", tag: "desktop",
			summary: "What this core offers: every feature, nothing gated", ok: &Schema{Type: "object"}, busFree: true},
	}
}
