package turnrunner

import (
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{DataDir: t.TempDir()}
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	tc := c.toolsConfig()
	if !tc.EnableBash || tc.BashTimeout != 30*time.Second || tc.BashOutputLimit != 64<<10 || tc.ReadLimit != 256<<10 {
		t.Errorf("tools config %+v", tc)
	}
	ac := c.agentConfig()
	if ac.MaxSteps != 200 || ac.MaxRetries != 3 || ac.RetryBackoff != time.Second || ac.BaseURL != "http://localhost:4000/v1" {
		t.Errorf("agent config %+v", ac)
	}
	off := Config{DataDir: t.TempDir(), EnableBash: BashOff, BashTimeout: time.Hour, BashMaxTimeout: time.Minute}
	if err := off.prepare(); err == nil {
		t.Errorf("bash timeout above its cap accepted")
	}
	off.BashMaxTimeout = 2 * time.Hour
	if err := off.prepare(); err != nil || off.toolsConfig().EnableBash {
		t.Errorf("disable bash: err %v, config %+v", err, off.toolsConfig())
	}
}
