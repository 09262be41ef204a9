package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// reflector turns Go types into JSON Schemas the way encoding/json encodes
// them: a field without omitempty is always present (required), a pointer
// without omitempty may be null, one with omitempty is simply left out,
// embedded structs are flattened, json.RawMessage and interfaces are any
// JSON value. Struct types named in refs become $refs to their component.
type reflector struct {
	refs map[reflect.Type]string
}

var (
	typeRawMessage = reflect.TypeFor[json.RawMessage]()
	typeTime       = reflect.TypeFor[time.Time]()
)

func (rf *reflector) schema(t reflect.Type) *Schema {
	if name, ok := rf.refs[t]; ok {
		return ref(name)
	}
	switch t {
	case typeRawMessage:
		return &Schema{Description: "any JSON value"}
	case typeTime:
		return &Schema{Type: "string", Format: "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return rf.schema(t.Elem())
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &Schema{Type: "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &Schema{Type: "integer", Minimum: ptr(0.0)}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Interface:
		return &Schema{}
	case reflect.Slice, reflect.Array:
		return &Schema{Type: "array", Items: rf.schema(t.Elem())}
	case reflect.Map:
		return &Schema{Type: "object", AdditionalProperties: rf.schema(t.Elem())}
	case reflect.Struct:
		s := &Schema{Type: "object", Properties: map[string]*Schema{}}
		rf.fields(s, t)
		return s
	}
	panic(fmt.Sprintf("openapi: no schema for Go type %s", t))
}

// fields adds t's encoded fields to s.
func (rf *reflector) fields(s *Schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			rf.fields(s, et)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		fs := rf.schema(f.Type)
		if f.Type.Kind() == reflect.Pointer && !omit {
			fs = nullable(fs)
		}
		s.Properties[name] = fs
		if !omit {
			s.Required = append(s.Required, name)
		}
	}
}

// nullable allows null beside what s allows.
func nullable(s *Schema) *Schema {
	if s.Ref != "" || s.Type == nil {
		if s.Type == nil && s.Ref == "" && len(s.OneOf) == 0 {
			return s // any value already includes null
		}
		return &Schema{OneOf: []*Schema{s, {Type: "null"}}}
	}
	c := *s
	if name, ok := s.Type.(string); ok {
		c.Type = []string{name, "null"}
	}
	return &c
}

func ref(name string) *Schema { return &Schema{Ref: "#/components/schemas/" + name} }

func ptr[T any](v T) *T { return &v }
