// Command fakellm is a test tool, not part of Waggle: a stand-in for a local
// model server such as Ollama, built on libs/llmtest. It lists the models
// given with -models on GET /v1/models and answers every chat completion
// with -reply, streamed, so scripts (scripts/first-hour.sh) can follow the
// README's "point it at Ollama" step without a real model.
//
//	fakellm [-models llama3.2:1b] [-reply "…"]
//
// It listens on a free port of 127.0.0.1, prints its base URL (with /v1) as
// the first line of stdout, and serves until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/waggle-os/core/libs/llmtest"
)

func main() {
	models := flag.String("models", "llama3.2:1b", "comma-separated model ids listed by GET /v1/models")
	reply := flag.String("reply", "Hello from the fake model.", "text of every chat reply")
	flag.Parse()

	var ids []string
	for _, id := range strings.Split(*models, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		fmt.Fprintln(os.Stderr, "fakellm: -models lists no model")
		os.Exit(2)
	}

	srv := llmtest.New(llmtest.WithModels(ids...), llmtest.WithDefault(llmtest.Reply(*reply)))
	srv.Start()
	defer srv.Close()
	// The caller reads this line to learn the port: a fixed port could be taken.
	fmt.Println(srv.URL())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
