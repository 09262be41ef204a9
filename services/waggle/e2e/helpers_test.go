package e2e

import "github.com/waggle-os/core/services/waggle/app"

type appConfig = app.Config
