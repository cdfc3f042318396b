package actors

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestRoundTrips(t *testing.T) {
	type plain struct {
		A string
		B int64            `json:"b,omitempty"`
		C []byte           `json:"c"`
		D *float64         `json:"d"`
		E map[string][]int `json:"e"`
		F [2]bool
	}
	type list struct {
		Next  *list
		Items []plain
	}
	type embedded struct{ plain }
	for _, c := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[plain](), true},
		{reflect.TypeFor[list](), true},
		{reflect.TypeFor[int](), true},
		{reflect.TypeFor[struct{ M json.RawMessage }](), false},
		{reflect.TypeFor[struct{ T time.Time }](), false},
		{reflect.TypeFor[struct{ X any }](), false},
		{reflect.TypeFor[any](), false},
		{reflect.TypeFor[struct{ hidden string }](), false},
		{reflect.TypeFor[struct {
			S string `json:"-"`
		}](), false},
		{reflect.TypeFor[embedded](), false},
		{reflect.TypeFor[struct{ C custom }](), false}, // MarshalJSON on *custom
		{reflect.TypeFor[map[int]string](), false},
		{reflect.TypeFor[chan int](), false},
	} {
		if got := roundTrips(c.t, map[reflect.Type]bool{}); got != c.want {
			t.Errorf("roundTrips(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}

// custom has a marshaller of its own, on the pointer.
type custom struct{ S string }

// MarshalJSON gives custom a pointer-receiver marshaller.
func (c *custom) MarshalJSON() ([]byte, error) { return json.Marshal("custom:" + c.S) }
