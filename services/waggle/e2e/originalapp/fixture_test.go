package originalapp

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFixtureIsTheRecordedBuild: the committed app is what
// scripts/build-original-app.sh produced — every file of testdata/app has
// the checksum testdata/SHA256SUMS records and no file is missing or
// added — and it carries its license and provenance. A hand edit of the
// fixture (or a partial rebuild) fails here, not as a puzzling browser
// failure.
func TestFixtureIsTheRecordedBuild(t *testing.T) {
	for _, name := range []string{"LICENSE", "PROVENANCE", "THIRD-PARTY-NOTICES"} {
		if st, err := os.Stat(filepath.Join("testdata", name)); err != nil || st.Size() == 0 {
			t.Errorf("testdata/%s: missing or empty (%v)", name, err)
		}
	}
	sums, err := os.Open(filepath.Join("testdata", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: malformed line %q", sc.Text())
		}
		want[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if want["app/index.html"] == "" {
		t.Fatalf("SHA256SUMS lists no app/index.html (%d entries)", len(want))
	}
	err = filepath.WalkDir(filepath.Join("testdata", "app"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := filepath.ToSlash(strings.TrimPrefix(path, "testdata"+string(filepath.Separator)))
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		switch w, ok := want[name]; {
		case !ok:
			t.Errorf("%s is not in SHA256SUMS (not from the build)", name)
		case w != hex.EncodeToString(sum[:]):
			t.Errorf("%s differs from the recorded build", name)
		}
		delete(want, name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		t.Errorf("%s is in SHA256SUMS but missing", name)
	}
}
