package slash

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeMarketplace answers from fields and records what it was asked.
type fakeMarketplace struct {
	search       SearchResult
	searchErr    error
	installMsg   string
	installErr   error
	packs        PackList
	packsErr     error
	installed    InstalledList
	installedErr error
	sync         SyncResult
	syncErr      error

	searches []string
	installs []int64
}

func (f *fakeMarketplace) Search(_ context.Context, q string, limit int) (SearchResult, error) {
	f.searches = append(f.searches, fmt.Sprintf("%s/%d", q, limit))
	return f.search, f.searchErr
}

func (f *fakeMarketplace) Install(_ context.Context, id int64) (string, error) {
	f.installs = append(f.installs, id)
	return f.installMsg, f.installErr
}

func (f *fakeMarketplace) Packs(context.Context) (PackList, error) { return f.packs, f.packsErr }

func (f *fakeMarketplace) Installed(context.Context) (InstalledList, error) {
	return f.installed, f.installedErr
}

func (f *fakeMarketplace) Sync(context.Context) (SyncResult, error) { return f.sync, f.syncErr }

func TestMarketplaceHelpAndUnknown(t *testing.T) {
	help := "## Marketplace Commands\n\n| Sub-command | Description |\n|-------------|-------------|\n" +
		"| `/marketplace search <query>` | Search the marketplace catalog |\n" +
		"| `/marketplace install <name>` | Install a package by name |\n" +
		"| `/marketplace packs` | List capability packs |\n" +
		"| `/marketplace installed` | List installed packages |\n" +
		"| `/marketplace sync` | Sync marketplace from sources |\n\n_Aliases: `/mp`, `/market`_"
	for _, in := range []string{"/marketplace", "/mp", "/market "} {
		if got := exec(t, in, Env{}); got != help {
			t.Errorf("%s =\n%q\nwant\n%q", in, got, help)
		}
	}
	want := "Unknown sub-command `Browse`.\n\nAvailable sub-commands: `search`, `install`, `packs`, `installed`, `sync`\n\nUsage: `/marketplace <sub-command> [args]`"
	if got := exec(t, "/mp Browse all", Env{}); got != want {
		t.Errorf("unknown sub =\n%q\nwant\n%q", got, want)
	}
}

func TestMarketplaceUnavailable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/marketplace search research", "Marketplace search error: marketplace is not available on this server"},
		{"/mp install deep-research", "Install error: marketplace is not available on this server"},
		{"/mp packs", "Packs error: marketplace is not available on this server"},
		{"/mp installed", "Installed error: marketplace is not available on this server"},
		{"/mp SYNC", "Sync error: marketplace is not available on this server"},
		{"/mp search", "Missing query. Usage: `/marketplace search <query>`\n\nExample: `/marketplace search research`"},
		{"/mp install", "Missing package name. Usage: `/marketplace install <name>`\n\nExample: `/marketplace install deep-research`"},
	}
	for _, tt := range tests {
		if got := exec(t, tt.in, Env{}); got != tt.want {
			t.Errorf("%s = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMarketplaceSearch(t *testing.T) {
	long := strings.Repeat("a", 58) + "bc" // 60: kept
	longer := strings.Repeat("é", 61)      // 61: cut to 57 + "..."
	pkgs := []Package{
		{ID: 1, Name: "deep-research", Description: "Deep research", Type: "skill", Category: "research"},
		{ID: 2, Name: "x", Description: "", Type: "plugin"},
		{ID: 3, Name: "y", Description: long, Type: "mcp", Category: "c"},
		{ID: 4, Name: "z", Description: longer, Type: "mcp", Category: "c"},
	}
	for i := 5; i <= 11; i++ {
		pkgs = append(pkgs, Package{ID: int64(i), Name: fmt.Sprintf("p%d", i), Description: "d", Type: "skill", Category: "c"})
	}
	mp := &fakeMarketplace{search: SearchResult{Packages: pkgs, Total: 42}}
	got := exec(t, "/mp search deep research", Env{Marketplace: mp})
	want := strings.Join([]string{
		"## Marketplace Search Results (42 total)",
		"",
		"| # | Name | Type | Category | Description |",
		"|---|------|------|----------|-------------|",
		"| 1 | `deep-research` | skill | research | Deep research |",
		"| 2 | `x` | plugin | — | — |",
		"| 3 | `y` | mcp | c | " + long + " |",
		"| 4 | `z` | mcp | c | " + strings.Repeat("é", 57) + "... |",
		"| 5 | `p5` | skill | c | d |",
		"| 6 | `p6` | skill | c | d |",
		"| 7 | `p7` | skill | c | d |",
		"| 8 | `p8` | skill | c | d |",
		"| 9 | `p9` | skill | c | d |",
		"| 10 | `p10` | skill | c | d |",
		"",
		"_Showing top 10 of 42 results._",
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Join(mp.searches, ",") != "deep research/10" {
		t.Errorf("searches %v", mp.searches)
	}

	tests := []struct {
		name string
		mp   *fakeMarketplace
		want string
	}{
		{"none", &fakeMarketplace{}, "No packages found."},
		{"rejected", &fakeMarketplace{searchErr: &Rejection{Reason: "bad query"}}, "Marketplace search failed: bad query"},
		{"wrapped rejection", &fakeMarketplace{searchErr: fmt.Errorf("client: %w", &Rejection{Reason: "Not Found"})}, "Marketplace search failed: Not Found"},
		{"unreachable", &fakeMarketplace{searchErr: errors.New("connection refused")}, "Marketplace search error: connection refused"},
	}
	for _, tt := range tests {
		if got := exec(t, "/mp search q", Env{Marketplace: tt.mp}); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestMarketplaceInstall(t *testing.T) {
	hits := SearchResult{Packages: []Package{{ID: 7, Name: "deep-research-pro"}, {ID: 9, Name: "Deep-Research"}}, Total: 2}
	tests := []struct {
		name       string
		mp         *fakeMarketplace
		want       string
		wantID     int64
		noInstalls bool
	}{
		{"exact match wins", &fakeMarketplace{search: hits, installMsg: "Ready."},
			"Successfully installed **Deep-Research**.\n\nReady.", 9, false},
		{"best match without message", &fakeMarketplace{search: SearchResult{Packages: []Package{{ID: 7, Name: "deep-research-pro"}}}},
			"Successfully installed **deep-research-pro**.", 7, false},
		{"no hit", &fakeMarketplace{},
			"No package found matching \"deep-research\". Try `/marketplace search deep-research` to see available packages.", 0, true},
		{"search rejected", &fakeMarketplace{searchErr: &Rejection{Reason: "Service Unavailable"}},
			"Failed to search marketplace: Service Unavailable", 0, true},
		{"search unreachable", &fakeMarketplace{searchErr: errors.New("dial tcp: refused")},
			"Install error: dial tcp: refused", 0, true},
		{"install rejected", &fakeMarketplace{search: hits, installErr: &Rejection{Reason: "already installed"}},
			"Failed to install \"Deep-Research\": already installed", 9, false},
		{"install rejected without reason", &fakeMarketplace{search: hits, installErr: &Rejection{}},
			"Failed to install \"Deep-Research\": Unknown error", 9, false},
		{"install unreachable", &fakeMarketplace{search: hits, installErr: errors.New("timeout")},
			"Install error: timeout", 9, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := exec(t, "/mp install deep-research", Env{Marketplace: tt.mp})
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if strings.Join(tt.mp.searches, ",") != "deep-research/5" {
				t.Errorf("searches %v, want [deep-research/5]", tt.mp.searches)
			}
			if tt.noInstalls {
				if len(tt.mp.installs) != 0 {
					t.Errorf("installed %v, want nothing", tt.mp.installs)
				}
			} else if len(tt.mp.installs) != 1 || tt.mp.installs[0] != tt.wantID {
				t.Errorf("installed %v, want [%d]", tt.mp.installs, tt.wantID)
			}
		})
	}
}

func TestMarketplacePacks(t *testing.T) {
	mp := &fakeMarketplace{packs: PackList{Total: 3, Packs: []Pack{
		{Slug: "research", DisplayName: "Research Pack", Description: "Deep research tools", Priority: "core", TargetRoles: "analyst, researcher"},
		{Slug: "misc", DisplayName: "Misc"},
		{Slug: "docs", DisplayName: "Docs Pack", Priority: "core"},
	}}}
	want := strings.Join([]string{
		"## Capability Packs (3 total)",
		"",
		"### Core Priority",
		"",
		"- **Research Pack** (`research`)",
		"  Deep research tools",
		"  _Roles: analyst, researcher_",
		"- **Docs Pack** (`docs`)",
		"",
		"### Default Priority",
		"",
		"- **Misc** (`misc`)",
		"",
	}, "\n")
	if got := exec(t, "/mp packs", Env{Marketplace: mp}); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	tests := []struct {
		mp   *fakeMarketplace
		want string
	}{
		{&fakeMarketplace{}, "No capability packs available."},
		{&fakeMarketplace{packsErr: &Rejection{Reason: "forbidden"}}, "Failed to list packs: forbidden"},
		{&fakeMarketplace{packsErr: errors.New("eof")}, "Packs error: eof"},
	}
	for _, tt := range tests {
		if got := exec(t, "/mp packs", Env{Marketplace: tt.mp}); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestMarketplaceInstalled(t *testing.T) {
	mp := &fakeMarketplace{installed: InstalledList{Total: 2, Installations: []Installation{
		{PackageID: 3, Name: "deep-research", InstallType: "skill", Status: "active", InstalledAt: time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC)},
		{PackageID: 8},
	}}}
	want := "## Installed Packages (2)\n\n| # | Name | Type | Status | Installed |\n|---|------|------|--------|-----------|\n" +
		"| 1 | `deep-research` | skill | active | 3/5/2026 |\n" +
		"| 2 | `pkg-8` | — | installed | — |"
	if got := exec(t, "/mp installed", Env{Marketplace: mp}); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	tests := []struct {
		mp   *fakeMarketplace
		want string
	}{
		{&fakeMarketplace{}, "No packages currently installed."},
		{&fakeMarketplace{installedErr: &Rejection{Reason: "Internal Server Error"}}, "Failed to list installed: Internal Server Error"},
		{&fakeMarketplace{installedErr: errors.New("reset")}, "Installed error: reset"},
	}
	for _, tt := range tests {
		if got := exec(t, "/mp installed", Env{Marketplace: tt.mp}); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestMarketplaceSync(t *testing.T) {
	tests := []struct {
		mp   *fakeMarketplace
		want string
	}{
		{&fakeMarketplace{sync: SyncResult{Sources: []SyncSource{
			{Source: "github", Added: 3, Updated: 1},
			{Source: "registry", Added: 0, Updated: 4, Errors: []string{"a", "b"}},
		}}}, "## Marketplace Sync Complete\n\n- **github**: +3 added, 1 updated\n- **registry**: +0 added, 4 updated (2 errors)"},
		{&fakeMarketplace{sync: SyncResult{Message: "Nothing to sync."}}, "Nothing to sync."},
		{&fakeMarketplace{}, "Marketplace sync complete."},
		{&fakeMarketplace{syncErr: &Rejection{Reason: "busy"}}, "Sync failed: busy"},
		{&fakeMarketplace{syncErr: errors.New("offline")}, "Sync error: offline"},
	}
	for _, tt := range tests {
		if got := exec(t, "/market sync", Env{Marketplace: tt.mp}); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestShortenNeverSplitsACharacter(t *testing.T) {
	tests := []struct{ in, want string }{
		{strings.Repeat("a", 60), strings.Repeat("a", 60)},
		{strings.Repeat("a", 61), strings.Repeat("a", 57) + "..."},
		// The emoji is two UTF-16 units and would straddle unit 57.
		{strings.Repeat("a", 56) + "😀" + strings.Repeat("b", 10), strings.Repeat("a", 56) + "..."},
		// 30 emoji are 60 units: short enough.
		{strings.Repeat("😀", 30), strings.Repeat("😀", 30)},
	}
	for _, tt := range tests {
		if got := shorten(tt.in); got != tt.want {
			t.Errorf("shorten(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
