package tools

import (
	"os"
	"testing"

	"github.com/waggle-os/core/services/turnrunner/tools/pdftext"
)

// TestMain lets this test binary serve as read_document's PDF worker, as
// the waggle binary does.
func TestMain(m *testing.M) {
	pdftext.Main()
	os.Exit(m.Run())
}
