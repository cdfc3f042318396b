package ans104

import (
	"fmt"
	"math"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// Tag is a data item's tag: a name and a value, as bytes. It is package arweave's, so that the
// same tags can go on a transaction or on a data item.
type Tag = arweave.Tag

// The limits on tags. The first three are ANS-104's (§2.1, with non-empty names and values);
// MaxTagBytes is arbundles': it refuses items whose tags take more Avro bytes, so no item past
// it could be read by bundlers and gateways.
const (
	MaxTags         = 128
	MaxTagNameSize  = 1024
	MaxTagValueSize = 3072
	MaxTagBytes     = 4096
)

// checkTags enforces the limits on each tag and on their number.
func checkTags(tags []Tag) error {
	if len(tags) > MaxTags {
		return fmt.Errorf("%w: %d tags, at most %d", ErrTagLimits, len(tags), MaxTags)
	}
	for i, t := range tags {
		if err := checkTag(i, t); err != nil {
			return err
		}
	}
	return nil
}

func checkTag(i int, t Tag) error {
	switch {
	case len(t.Name) == 0:
		return fmt.Errorf("%w: tag %d has an empty name", ErrTagLimits, i)
	case len(t.Name) > MaxTagNameSize:
		return fmt.Errorf("%w: tag %d has a name of %d bytes, at most %d", ErrTagLimits, i, len(t.Name), MaxTagNameSize)
	case len(t.Value) == 0:
		return fmt.Errorf("%w: tag %d (%.40q) has an empty value", ErrTagLimits, i, t.Name)
	case len(t.Value) > MaxTagValueSize:
		return fmt.Errorf("%w: tag %d (%.40q) has a value of %d bytes, at most %d", ErrTagLimits, i, t.Name, len(t.Value), MaxTagValueSize)
	}
	return nil
}

// encodeTags writes tags as arbundles does: nothing at all for no tags (not the one-byte empty
// Avro array: the signature covers these bytes, so the choice must be arbundles'), otherwise one
// block (its count, then each name and value as Avro bytes) and the closing empty block.
func encodeTags(tags []Tag) []byte {
	if len(tags) == 0 {
		return nil
	}
	size := 2 * binaryLongLen
	for _, t := range tags {
		size += 2*binaryLongLen + len(t.Name) + len(t.Value)
	}
	b := make([]byte, 0, size)
	b = appendLong(b, int64(len(tags)))
	for _, t := range tags {
		b = appendLong(b, int64(len(t.Name)))
		b = append(b, t.Name...)
		b = appendLong(b, int64(len(t.Value)))
		b = append(b, t.Value...)
	}
	return appendLong(b, 0)
}

// binaryLongLen is the most bytes an Avro long takes.
const binaryLongLen = 10

// appendLong appends n as an Avro long: zig-zag, then 7 bits a byte, low bits first, the high
// bit of each byte saying that another follows.
func appendLong(b []byte, n int64) []byte {
	u := uint64(n<<1) ^ uint64(n>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// avroReader reads Avro values from b, saying where a value goes wrong.
type avroReader struct {
	b   []byte
	pos int
}

// field names what is read, for errors only (so that reading builds no strings): a part of
// the array, or the name or value of tag number tag.
type field struct {
	what string
	tag  int // -1 when what is not a tag's
}

func (f field) String() string {
	if f.tag < 0 {
		return f.what
	}
	return fmt.Sprintf("tag %d %s", f.tag, f.what)
}

func (r *avroReader) long(f field, part string) (int64, error) {
	var u uint64
	start := r.pos
	for shift := 0; ; shift += 7 {
		if r.pos >= len(r.b) {
			return 0, fmt.Errorf("%w: tags: %v%s at byte %d runs past the end of the %d tag bytes", ErrMalformed, f, part, start, len(r.b))
		}
		c := r.b[r.pos]
		r.pos++
		// The tenth byte holds the 64th bit alone; more would overflow.
		if shift == 63 && c > 1 {
			return 0, fmt.Errorf("%w: tags: %v%s at byte %d overflows a 64-bit long", ErrMalformed, f, part, start)
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

// bytes reads an Avro bytes value: its length as a long, then the bytes (a view of r.b).
func (r *avroReader) bytes(f field) ([]byte, error) {
	start := r.pos
	n, err := r.long(f, " length")
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)-r.pos) {
		return nil, fmt.Errorf("%w: tags: %v at byte %d says %d bytes, %d remain", ErrMalformed, f, start, n, len(r.b)-r.pos)
	}
	v := r.b[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return v, nil
}

// decodeTags reads an Avro array of tags in any block form Avro allows (ANS-104 §1.3.1.3):
// blocks of a positive count, or of a negative count followed by the block's size in bytes,
// ended by a block of count 0. The empty input is no tags (arbundles writes nothing for none).
// It checks each tag against the limits, and refuses bytes after the array.
func decodeTags(b []byte) ([]Tag, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := &avroReader{b: b}
	var tags []Tag
	for {
		blockAt := r.pos
		count, err := r.long(field{"block count", -1}, "")
		if err != nil {
			return nil, err
		}
		if count == 0 {
			break
		}
		size := int64(-1)
		if count < 0 {
			if count == math.MinInt64 {
				return nil, fmt.Errorf("%w: tags: block count at byte %d out of range", ErrMalformed, blockAt)
			}
			count = -count
			if size, err = r.long(field{"block size", -1}, ""); err != nil {
				return nil, err
			}
			if size < 0 {
				return nil, fmt.Errorf("%w: tags: block at byte %d has a negative size %d", ErrMalformed, blockAt, size)
			}
		}
		// Checked before reading the items, so that a huge count costs nothing.
		if count > int64(MaxTags-len(tags)) {
			return nil, fmt.Errorf("%w: more than %d tags in the Avro array", ErrTagLimits, MaxTags)
		}
		itemsAt := r.pos
		for range count {
			i := len(tags)
			name, err := r.bytes(field{"name", i})
			if err != nil {
				return nil, err
			}
			value, err := r.bytes(field{"value", i})
			if err != nil {
				return nil, err
			}
			t := Tag{Name: name, Value: value}
			if err := checkTag(i, t); err != nil {
				return nil, err
			}
			tags = append(tags, t)
		}
		if size >= 0 && int64(r.pos-itemsAt) != size {
			return nil, fmt.Errorf("%w: tags: block at byte %d says %d bytes, its items take %d", ErrMalformed, blockAt, size, r.pos-itemsAt)
		}
	}
	if r.pos != len(b) {
		return nil, fmt.Errorf("%w: tags: %d bytes after the end of the Avro array", ErrMalformed, len(b)-r.pos)
	}
	return tags, nil
}
