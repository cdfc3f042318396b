package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// applyFile sets the keys of the YAML file path into s's Config. The file holds one mapping whose keys
// are flag names; values are scalars in the syntax of the flag (YAML numbers are taken in their
// written form), or for --join also a list. An empty file sets nothing.
//
// A file that sets a secret (Option.HoldsSecret) to a value is held to what ReadSecretFile
// asks of a secret file: other users may not access it. Settings without secrets stay
// shareable (a file readable by a team or a config management tool).
func (s *settings) applyFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading --config file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading --config file: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("reading --config file %s: %w", path, err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: expected a single YAML document", path)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	root = resolveAlias(root)
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil // a file of comments only
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: expected a mapping of flag names to values", path, root.Line)
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := resolveAlias(root.Content[i]), resolveAlias(root.Content[i+1])
		at := fmt.Sprintf("config file %s: line %d", path, k.Line)
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: key is not a string", at)
		}
		o, ok := s.lookup(k.Value)
		if !ok {
			return fmt.Errorf("%s: unknown key %q", at, k.Value)
		}
		if o.NoFile {
			return fmt.Errorf("%s: key %q cannot be set in the config file", at, k.Value)
		}
		if seen[k.Value] {
			return fmt.Errorf("%s: duplicate key %q", at, k.Value)
		}
		seen[k.Value] = true
		val, err := nodeString(o, v)
		if err != nil {
			return fmt.Errorf("%s: key %q: %w", at, k.Value, err)
		}
		if perm := st.Mode().Perm(); o.HoldsSecret() && val != "" && perm&0o077 != 0 {
			// The key names the secret, never its value.
			return fmt.Errorf("%s: key %q holds a secret, and other users can access the file (mode %04o): make it readable by its owner only (chmod 600 %s), or give the secret in a file of its own",
				at, k.Value, perm, path)
		}
		if err := o.Value.Set(val); err != nil {
			return invalidValue(o.Name, val, fmt.Sprintf("from config file %s line %d", path, v.Line), err)
		}
	}
	return nil
}

// nodeString is the flag syntax of a YAML value: a scalar's text (null is empty), or for a list
// option its elements joined by commas.
func nodeString(o Option, n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "", nil
		}
		return n.Value, nil
	case yaml.SequenceNode:
		if _, ok := o.Value.(*listValue); !ok {
			return "", fmt.Errorf("expected a single value, not a list")
		}
		elems := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			e = resolveAlias(e)
			if e.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: list element is not a single value", e.Line)
			}
			elems = append(elems, e.Value)
		}
		return strings.Join(elems, ","), nil
	default:
		return "", fmt.Errorf("expected a single value")
	}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
