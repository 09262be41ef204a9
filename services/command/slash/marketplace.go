package slash

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/waggle-os/core/libs/protocol"
)

// ErrMarketplaceUnavailable is the error every /marketplace sub-command
// reports when Env.Marketplace is nil.
var ErrMarketplaceUnavailable = errors.New("marketplace is not available on this server")

// Marketplace is the catalogue /marketplace talks to. The original called a
// hard-coded local URL; here the caller decides where the catalogue lives.
//
// An error that is (or wraps) a *Rejection means the marketplace answered
// and refused; any other error means it could not be reached. The two read
// differently to the user ("… failed: <reason>" against "… error: <msg>").
type Marketplace interface {
	// Search returns up to limit packages matching query, and the total.
	Search(ctx context.Context, query string, limit int) (SearchResult, error)
	// Install installs the package with the given id; the message is shown
	// to the user on success.
	Install(ctx context.Context, packageID int64) (message string, err error)
	// Packs lists the capability packs.
	Packs(ctx context.Context) (PackList, error)
	// Installed lists the installed packages.
	Installed(ctx context.Context) (InstalledList, error)
	// Sync refreshes the catalogue from its sources.
	Sync(ctx context.Context) (SyncResult, error)
}

// Rejection is a refusal reported by the marketplace itself (an error
// status, or an install that did not succeed).
type Rejection struct {
	// Reason is the marketplace's message; may be empty.
	Reason string
}

// Error implements error.
func (r *Rejection) Error() string { return r.Reason }

// Package is one catalogue entry.
type Package struct {
	// ID is what Install takes.
	ID int64
	// Name is the package name users type in /marketplace install.
	Name string
	// Description is cut to 57 characters plus "..." beyond 60.
	Description string
	// Type is the package type (skill, plugin, mcp, …).
	Type string
	// Category is optional.
	Category string
}

// SearchResult is one page of search hits and the total number of hits.
type SearchResult struct {
	// Packages are the hits, best first.
	Packages []Package
	// Total counts every hit, not only this page.
	Total int
}

// Pack is a capability pack.
type Pack struct {
	// Slug identifies the pack.
	Slug string
	// DisplayName is the pack's title.
	DisplayName string
	// Description is optional.
	Description string
	// Priority groups packs in the listing ("" lists as "default").
	Priority string
	// TargetRoles is an optional free-text list of roles.
	TargetRoles string
}

// PackList is the list of capability packs and their total.
type PackList struct {
	// Packs are listed grouped by priority.
	Packs []Pack
	// Total is shown in the heading.
	Total int
}

// Installation is one installed package.
type Installation struct {
	// PackageID names the package when Name is empty ("pkg-<id>").
	PackageID int64
	// Name is the package name; may be empty.
	Name string
	// InstallType is optional.
	InstallType string
	// Status defaults to "installed" when empty.
	Status string
	// InstalledAt is optional (zero shows as "—").
	InstalledAt time.Time
}

// InstalledList is the list of installed packages and their total.
type InstalledList struct {
	// Installations are listed in order.
	Installations []Installation
	// Total is shown in the heading.
	Total int
}

// SyncSource is the outcome of syncing one source.
type SyncSource struct {
	// Source names the synced source.
	Source string
	// Added counts new packages.
	Added int
	// Updated counts refreshed packages.
	Updated int
	// Errors are the source's failures; only their number is shown.
	Errors []string
}

// SyncResult is the outcome of a sync: per-source results, or just a message.
type SyncResult struct {
	// Sources are listed when present.
	Sources []SyncSource
	// Message is shown when there are no Sources.
	Message string
}

func marketplaceCommand() *command {
	return &command{
		name:        "marketplace",
		aliases:     []string{"mp", "market"},
		usage:       "/marketplace <search|install|packs|installed|sync> [args]",
		description: "Marketplace — search, install, list packs, view installed, sync",
		run:         runMarketplace,
	}
}

func runMarketplace(ctx context.Context, args string, env Env) (string, error) {
	if args == "" {
		return strings.Join([]string{
			"## Marketplace Commands",
			"",
			"| Sub-command | Description |",
			"|-------------|-------------|",
			"| `/marketplace search <query>` | Search the marketplace catalog |",
			"| `/marketplace install <name>` | Install a package by name |",
			"| `/marketplace packs` | List capability packs |",
			"| `/marketplace installed` | List installed packages |",
			"| `/marketplace sync` | Sync marketplace from sources |",
			"",
			"_Aliases: `/mp`, `/market`_",
		}, "\n"), nil
	}
	sub, rest, _ := strings.Cut(args, " ")
	rest = trim(rest)
	mp := env.Marketplace
	switch strings.ToLower(sub) {
	case "search":
		if rest == "" {
			return "Missing query. Usage: `/marketplace search <query>`\n\nExample: `/marketplace search research`", nil
		}
		if mp == nil {
			return "Marketplace search error: " + ErrMarketplaceUnavailable.Error(), nil
		}
		res, err := mp.Search(ctx, rest, 10)
		if err != nil {
			return failure(err, "Marketplace search failed: ", "Marketplace search error: "), nil
		}
		return formatSearch(res), nil
	case "install":
		if rest == "" {
			return "Missing package name. Usage: `/marketplace install <name>`\n\nExample: `/marketplace install deep-research`", nil
		}
		return install(ctx, mp, rest), nil
	case "packs":
		if mp == nil {
			return "Packs error: " + ErrMarketplaceUnavailable.Error(), nil
		}
		res, err := mp.Packs(ctx)
		if err != nil {
			return failure(err, "Failed to list packs: ", "Packs error: "), nil
		}
		return formatPacks(res), nil
	case "installed":
		if mp == nil {
			return "Installed error: " + ErrMarketplaceUnavailable.Error(), nil
		}
		res, err := mp.Installed(ctx)
		if err != nil {
			return failure(err, "Failed to list installed: ", "Installed error: "), nil
		}
		return formatInstalled(res), nil
	case "sync":
		if mp == nil {
			return "Sync error: " + ErrMarketplaceUnavailable.Error(), nil
		}
		res, err := mp.Sync(ctx)
		if err != nil {
			return failure(err, "Sync failed: ", "Sync error: "), nil
		}
		return formatSync(res), nil
	}
	return strings.Join([]string{
		"Unknown sub-command `" + sub + "`.",
		"",
		"Available sub-commands: `search`, `install`, `packs`, `installed`, `sync`",
		"",
		"Usage: `/marketplace <sub-command> [args]`",
	}, "\n"), nil
}

// failure picks the text for a refusal (rejected) or an unreachable
// marketplace (broken).
func failure(err error, rejected, broken string) string {
	if rej, ok := errors.AsType[*Rejection](err); ok {
		return rejected + rej.Reason
	}
	return broken + err.Error()
}

// install resolves name to a package (exact case-insensitive match among the
// first five hits, else the best hit) and installs it by id.
func install(ctx context.Context, mp Marketplace, name string) string {
	if mp == nil {
		return "Install error: " + ErrMarketplaceUnavailable.Error()
	}
	hits, err := mp.Search(ctx, name, 5)
	if err != nil {
		return failure(err, "Failed to search marketplace: ", "Install error: ")
	}
	if len(hits.Packages) == 0 {
		return "No package found matching \"" + name + "\". Try `/marketplace search " + name + "` to see available packages."
	}
	target := hits.Packages[0]
	for _, p := range hits.Packages {
		if strings.EqualFold(p.Name, name) {
			target = p
			break
		}
	}
	msg, err := mp.Install(ctx, target.ID)
	if err != nil {
		if rej, ok := errors.AsType[*Rejection](err); ok {
			reason := rej.Reason
			if reason == "" {
				reason = "Unknown error"
			}
			return "Failed to install \"" + target.Name + "\": " + reason
		}
		return "Install error: " + err.Error()
	}
	out := "Successfully installed **" + target.Name + "**."
	if msg != "" {
		out += "\n\n" + msg
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// shorten cuts descriptions longer than 60 UTF-16 units (the original's
// string length) to 57 units plus "...", never splitting a character.
func shorten(s string) string {
	if protocol.UTF16Len(s) <= 60 {
		return s
	}
	units := 0
	for i, r := range s {
		// Ranging yields valid runes (bad bytes become U+FFFD), so RuneLen
		// is 1 or 2 here.
		units += utf16.RuneLen(r)
		if units > 57 {
			return s[:i] + "..."
		}
	}
	return s
}

func formatSearch(res SearchResult) string {
	if len(res.Packages) == 0 {
		return "No packages found."
	}
	total := strconv.Itoa(res.Total)
	lines := []string{
		"## Marketplace Search Results (" + total + " total)",
		"",
		"| # | Name | Type | Category | Description |",
		"|---|------|------|----------|-------------|",
	}
	for i, p := range res.Packages {
		if i == 10 {
			break
		}
		lines = append(lines, "| "+strconv.Itoa(i+1)+" | `"+p.Name+"` | "+p.Type+" | "+orDash(p.Category)+" | "+orDash(shorten(p.Description))+" |")
	}
	if res.Total > 10 {
		lines = append(lines, "", "_Showing top 10 of "+total+" results._")
	}
	return strings.Join(lines, "\n")
}

// formatPacks groups packs by priority, tiers in order of first appearance.
func formatPacks(res PackList) string {
	if len(res.Packs) == 0 {
		return "No capability packs available."
	}
	var tiers []string
	groups := make(map[string][]Pack)
	for _, p := range res.Packs {
		tier := p.Priority
		if tier == "" {
			tier = "default"
		}
		if _, seen := groups[tier]; !seen {
			tiers = append(tiers, tier)
		}
		groups[tier] = append(groups[tier], p)
	}
	lines := []string{"## Capability Packs (" + strconv.Itoa(res.Total) + " total)", ""}
	for _, tier := range tiers {
		lines = append(lines, "### "+capitalize(tier)+" Priority", "")
		for _, p := range groups[tier] {
			lines = append(lines, "- **"+p.DisplayName+"** (`"+p.Slug+"`)")
			if p.Description != "" {
				lines = append(lines, "  "+p.Description)
			}
			if p.TargetRoles != "" {
				lines = append(lines, "  _Roles: "+p.TargetRoles+"_")
			}
		}
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[size:]
}

// installedDateLayout renders dates as the original's en-US
// toLocaleDateString did (month/day/year, no padding).
const installedDateLayout = "1/2/2006"

func formatInstalled(res InstalledList) string {
	if len(res.Installations) == 0 {
		return "No packages currently installed."
	}
	lines := []string{
		"## Installed Packages (" + strconv.Itoa(res.Total) + ")",
		"",
		"| # | Name | Type | Status | Installed |",
		"|---|------|------|--------|-----------|",
	}
	for i, in := range res.Installations {
		name := in.Name
		if name == "" {
			name = "pkg-" + strconv.FormatInt(in.PackageID, 10)
		}
		status := in.Status
		if status == "" {
			status = "installed"
		}
		date := "—"
		if !in.InstalledAt.IsZero() {
			date = in.InstalledAt.Format(installedDateLayout)
		}
		lines = append(lines, "| "+strconv.Itoa(i+1)+" | `"+name+"` | "+orDash(in.InstallType)+" | "+status+" | "+date+" |")
	}
	return strings.Join(lines, "\n")
}

func formatSync(res SyncResult) string {
	if len(res.Sources) == 0 {
		if res.Message != "" {
			return res.Message
		}
		return "Marketplace sync complete."
	}
	lines := []string{"## Marketplace Sync Complete", ""}
	for _, s := range res.Sources {
		note := ""
		if len(s.Errors) > 0 {
			note = " (" + strconv.Itoa(len(s.Errors)) + " errors)"
		}
		lines = append(lines, "- **"+s.Source+"**: +"+strconv.Itoa(s.Added)+" added, "+strconv.Itoa(s.Updated)+" updated"+note)
	}
	return strings.Join(lines, "\n")
}
