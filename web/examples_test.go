package web

import (
	"os"
	"regexp"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// TestPlaygroundExamplesMatchSchema validates the playground's example
// document against the schema, so that an example naming a field that
// changed or went away fails here rather than in front of a developer.
func TestPlaygroundExamplesMatchSchema(t *testing.T) {
	src, err := os.ReadFile("src/playground/examples.ts")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)exampleOperations = `(.*?)`;").FindSubmatch(src)
	if m == nil {
		t.Fatal("exampleOperations not found in src/playground/examples.ts")
	}
	sdl, err := os.ReadFile("../schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	schema, gerr := gqlparser.LoadSchema(&ast.Source{Name: "schema.graphqls", Input: string(sdl)})
	if gerr != nil {
		t.Fatal(gerr)
	}
	doc, errs := gqlparser.LoadQueryWithRules(schema, string(m[1]), rules.NewDefaultRules())
	for _, e := range errs {
		t.Errorf("examples: %v", e)
	}
	if len(errs) == 0 && len(doc.Operations) < 10 {
		t.Errorf("only %d operations found: is the document read whole?", len(doc.Operations))
	}
}
