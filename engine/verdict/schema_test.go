package verdict

import (
	"sync"
	"testing"
)

func TestSchemaCompiledOnce(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := schemaFor(`{"type":"array","x-once":true}`)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	wg.Wait()
	for _, s := range got {
		if s != got[0] || s == nil {
			t.Fatal("schema compiled more than once or not at all")
		}
	}
	if _, err := schemaFor(`{"$ref":"https://example.com/s.json"}`); err == nil {
		t.Error("external $ref was loaded")
	}
}
