package embednats

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Every NATS configuration we ship fsyncs each JetStream write, and so
// does the embedded server without one.
func TestEveryServerFsyncsEachWrite(t *testing.T) {
	for _, env := range []string{"NATS_SERVER_NAME", "NATS_GATEWAY_PASSWORD", "NATS_RUNNER_PASSWORD", "NATS_STORE_PASSWORD",
		"NATS_APPROVAL_PASSWORD", "NATS_COMMAND_PASSWORD", "NATS_ADMIN_PASSWORD", "NATS_SYS_PASSWORD"} {
		t.Setenv(env, "x")
	}
	files, err := filepath.Glob("../../deploy/nats/*.conf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/nats/*.conf: %v", err)
	}
	for _, f := range files {
		opts, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !opts.SyncAlways {
			t.Errorf("%s: sync_interval is not always", f)
		}
	}
	opts, err := New(Config{StoreDir: t.TempDir()}).options()
	if err != nil {
		t.Fatal(err)
	}
	if !opts.SyncAlways {
		t.Error("the embedded server does not fsync every write")
	}
}
