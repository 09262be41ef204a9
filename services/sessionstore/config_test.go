package sessionstore

import "testing"

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		ok      bool
		wantSet string
	}{
		{"default store is jsonl", Config{DataDir: "d"}, true, StoreJSONL},
		{"jsonl with postgres for teams", Config{DataDir: "d", PostgresURL: "postgres://x", Store: "jsonl"}, true, StoreJSONL},
		{"postgres everywhere", Config{DataDir: "d", PostgresURL: "postgres://x", Store: "postgres"}, true, StorePostgres},
		{"postgres without URL", Config{DataDir: "d", Store: "postgres"}, false, ""},
		{"unknown store", Config{DataDir: "d", Store: "mysql"}, false, ""},
		{"no data dir", Config{}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.prepare()
			if (err == nil) != tc.ok {
				t.Fatalf("prepare() = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && tc.cfg.Store != tc.wantSet {
				t.Errorf("Store = %q, want %q", tc.cfg.Store, tc.wantSet)
			}
		})
	}
}
