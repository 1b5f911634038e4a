package spark

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rebucket/rebucket/engine/spark/sparkhash"
	"github.com/rebucket/rebucket/internal/unsaferow"
	"github.com/rebucket/rebucket/snapshotfmt"
)

// transformWithState (and its Python twins) keeps all its state in one
// RocksDB store ("default") in virtual column families: every stored key
// starts with the family's id (2 bytes, little-endian), then the family's
// key as its encoder lays it out. The families and their encoders are in
// the operator's state schema file (v3), named by the v2 operator
// metadata; the id of each family is in every <v>.zip's metadata.
//
// rebucket keeps keys and values as stored (ids included) and finds in
// each key the grouping key, which Spark partitions by:
//   - NoPrefixKeyStateEncoderSpec: [00][UnsafeRow of the key schema]
//   - PrefixKeyScanStateEncoderSpec(n): [int32 LE L][00][prefix row of the
//     first n fields] (L bytes, version byte included) [00][row of the rest]
//   - RangeKeyScanStateEncoderSpec(ordinals): [int32 LE L][L bytes of the
//     ordering fields in a sortable encoding][00][row of the other fields]
// The grouping key G is the key schema of the value and list families, or
// the "key" field of the timer and map families; in each family it is the
// whole key row, a top-level struct field of type G, or a field of type G
// inside a top-level struct (a TTL index's elementKey of a map state).
// Murmur3 of a struct chains its fields from the seed, so hashing the
// nested G gives the grouping key's hash.

// TWS operator names in the v2 operator metadata.
var twsOperators = map[string]bool{
	OpTransformWithState:             true,
	OpTransformWithStateP:            true,
	"transformWithStateInPandasExec": true,
}

// Key encoders of a column family.
const (
	encNoPrefix  = "NoPrefixKeyStateEncoderSpec"
	encPrefix    = "PrefixKeyScanStateEncoderSpec"
	encRangeScan = "RangeKeyScanStateEncoderSpec"
)

// ColumnFamily is one virtual column family of a transformWithState store.
type ColumnFamily struct {
	Name        string
	ID          uint16
	KeySchema   *unsaferow.Type
	ValueSchema *unsaferow.Type
	Encoder     string
	// List says the family is a list state (the operator metadata's
	// stateVariableType): its values are elements appended by merges.
	List             bool
	NumColsPrefixKey int
	OrderingOrdinals []int
	// Where the grouping key is: in which part of the key (the whole row,
	// the prefix row or the remaining row), that part's schema, and the
	// field path from it (empty: the part is the grouping key).
	part       int
	partSchema *unsaferow.Type
	path       []int
}

const (
	partWhole = iota
	partPrefix
	partRemaining
)

// TWS is the column family layout of a transformWithState store.
type TWS struct {
	Grouping *unsaferow.Type
	Families []*ColumnFamily
	byID     map[uint16]*ColumnFamily
	// zipCF is the column family part of a <v>.zip's metadata (mapping,
	// type map, max id), copied into the empty snapshots of new partitions.
	zipCF map[string]json.RawMessage
}

type twsEncoderSpec struct {
	Type             string `json:"keyStateEncoderType"`
	NumColsPrefixKey int    `json:"numColsPrefixKey"`
	OrderingOrdinals []int  `json:"orderingOrdinals"`
}

// parseSchemaV3 reads a transformWithState schema file: "v3", an int32
// count, then per family its name, key schema id and chunked JSON, value
// schema id and chunked JSON, the encoder spec JSON and the user key
// schema JSON.
func parseSchemaV3(b []byte) ([]*ColumnFamily, error) {
	r := &utfReader{b: b}
	if v := r.utf(); r.err != nil || v != "v3" {
		return nil, fmt.Errorf("%w: state schema file version %q (rebucket reads v3 for transformWithState)", snapshotfmt.ErrUnsupported, v)
	}
	if len(r.b) < 4 {
		return nil, fmt.Errorf("%w: state schema file: no family count", snapshotfmt.ErrCorrupt)
	}
	n := int(int32(binary.BigEndian.Uint32(r.b)))
	r.b = r.b[4:]
	if n < 0 || n > 4096 {
		return nil, fmt.Errorf("%w: state schema file: %d column families", snapshotfmt.ErrCorrupt, n)
	}
	short := func() {
		if r.err == nil && len(r.b) < 2 {
			r.err = fmt.Errorf("truncated schema id")
		}
		if r.err == nil {
			r.b = r.b[2:]
		}
	}
	var out []*ColumnFamily
	for range n {
		cf := &ColumnFamily{Name: r.utf()}
		short()
		keyJSON := r.chunked()
		short()
		valueJSON := r.chunked()
		encJSON := r.chunked()
		r.chunked() // user key schema (map state), also inside the key schema
		if r.err != nil {
			return nil, fmt.Errorf("%w: state schema file: %v", snapshotfmt.ErrCorrupt, r.err)
		}
		var err error
		if cf.KeySchema, err = unsaferow.ParseSchema([]byte(keyJSON)); err != nil {
			return nil, fmt.Errorf("column family %q key schema: %w", cf.Name, err)
		}
		if cf.ValueSchema, err = unsaferow.ParseSchema([]byte(valueJSON)); err != nil {
			return nil, fmt.Errorf("column family %q value schema: %w", cf.Name, err)
		}
		var spec twsEncoderSpec
		if err := json.Unmarshal([]byte(encJSON), &spec); err != nil {
			return nil, fmt.Errorf("%w: column family %q encoder spec: %v", snapshotfmt.ErrCorrupt, cf.Name, err)
		}
		cf.Encoder, cf.NumColsPrefixKey, cf.OrderingOrdinals = spec.Type, spec.NumColsPrefixKey, spec.OrderingOrdinals
		out = append(out, cf)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: state schema file: %d bytes after the last column family", snapshotfmt.ErrCorrupt, len(r.b))
	}
	return out, nil
}

func sameType(a, b *unsaferow.Type) bool { return a.String() == b.String() }

// groupingKey finds G: the key schema of a value or list family, or the
// "key" field of a map or timer family; every candidate must agree.
func groupingKey(cfs []*ColumnFamily) (*unsaferow.Type, error) {
	var g *unsaferow.Type
	for _, cf := range cfs {
		var cand *unsaferow.Type
		switch {
		case cf.Encoder == encNoPrefix && !strings.HasPrefix(cf.Name, "$"):
			cand = cf.KeySchema
		case cf.Encoder == encPrefix && len(cf.KeySchema.Fields) > 0 && cf.KeySchema.Fields[0].Name == "key" && cf.KeySchema.Fields[0].Type.Kind == unsaferow.Struct:
			cand = cf.KeySchema.Fields[0].Type
		default:
			continue
		}
		if g == nil {
			g = cand
		} else if !sameType(g, cand) {
			return nil, fmt.Errorf("%w: transformWithState column families disagree on the grouping key (%s, %s)", snapshotfmt.ErrUnsupported, g, cand)
		}
	}
	if g == nil {
		return nil, fmt.Errorf("%w: transformWithState store whose column families show no grouping key", snapshotfmt.ErrUnsupported)
	}
	return g, nil
}

// locate sets where the grouping key g sits in the family's key.
func (cf *ColumnFamily) locate(g *unsaferow.Type) error {
	fields := cf.KeySchema.Fields
	sub := func(idx []int) *unsaferow.Type {
		t := &unsaferow.Type{Kind: unsaferow.Struct}
		for _, i := range idx {
			t.Fields = append(t.Fields, fields[i])
		}
		return t
	}
	var parts []struct {
		part int
		t    *unsaferow.Type
	}
	switch cf.Encoder {
	case encNoPrefix:
		parts = append(parts, struct {
			part int
			t    *unsaferow.Type
		}{partWhole, cf.KeySchema})
	case encPrefix:
		n := cf.NumColsPrefixKey
		if n < 1 || n > len(fields) {
			return fmt.Errorf("%w: column family %q: numColsPrefixKey %d of %d fields", snapshotfmt.ErrCorrupt, cf.Name, n, len(fields))
		}
		var pre, rest []int
		for i := range fields {
			if i < n {
				pre = append(pre, i)
			} else {
				rest = append(rest, i)
			}
		}
		parts = append(parts, struct {
			part int
			t    *unsaferow.Type
		}{partPrefix, sub(pre)}, struct {
			part int
			t    *unsaferow.Type
		}{partRemaining, sub(rest)})
	case encRangeScan:
		ord := map[int]bool{}
		for _, o := range cf.OrderingOrdinals {
			if o < 0 || o >= len(fields) {
				return fmt.Errorf("%w: column family %q: ordering ordinal %d of %d fields", snapshotfmt.ErrCorrupt, cf.Name, o, len(fields))
			}
			ord[o] = true
		}
		var rest []int
		for i := range fields {
			if !ord[i] {
				rest = append(rest, i)
			}
		}
		parts = append(parts, struct {
			part int
			t    *unsaferow.Type
		}{partRemaining, sub(rest)})
	default:
		return fmt.Errorf("%w: column family %q with key encoder %q", snapshotfmt.ErrUnsupported, cf.Name, cf.Encoder)
	}
	for _, p := range parts {
		if sameType(p.t, g) && cf.Encoder == encNoPrefix {
			cf.part, cf.partSchema, cf.path = p.part, p.t, nil
			return nil
		}
		for i, f := range p.t.Fields {
			if sameType(f.Type, g) {
				cf.part, cf.partSchema, cf.path = p.part, p.t, []int{i}
				return nil
			}
		}
		for i, f := range p.t.Fields {
			if f.Type.Kind != unsaferow.Struct {
				continue
			}
			for j, h := range f.Type.Fields {
				if sameType(h.Type, g) {
					cf.part, cf.partSchema, cf.path = p.part, p.t, []int{i, j}
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%w: column family %q (key %s): cannot find the grouping key %s in it", snapshotfmt.ErrUnsupported, cf.Name, cf.KeySchema, g)
}

// hash is Spark's Murmur3 of the grouping key in a stored key (family id
// first).
func (t *TWS) hash(key []byte) (int32, error) {
	_, g, null, err := t.GroupingKey(key)
	if err != nil || null {
		return sparkhash.Seed, err
	}
	return sparkhash.HashRow(t.Grouping, g, nil, sparkhash.Seed)
}

// GroupingKey returns the family of a stored key and its grouping key, an
// UnsafeRow of t.Grouping (null: the key holds a null grouping struct).
func (t *TWS) GroupingKey(key []byte) (cf *ColumnFamily, g unsaferow.Row, null bool, err error) {
	if len(key) < 3 {
		return nil, g, false, fmt.Errorf("%w: transformWithState key of %d bytes", snapshotfmt.ErrCorrupt, len(key))
	}
	id := binary.LittleEndian.Uint16(key)
	cf = t.byID[id]
	if cf == nil {
		return nil, g, false, fmt.Errorf("%w: key of column family id %d, which the checkpoint's snapshot metadata does not name", snapshotfmt.ErrCorrupt, id)
	}
	fail := func(err error) (*ColumnFamily, unsaferow.Row, bool, error) {
		return cf, unsaferow.Row{}, false, fmt.Errorf("column family %q: %w", cf.Name, err)
	}
	b := key[2:]
	var part []byte
	switch cf.Encoder {
	case encNoPrefix:
		part = b
	default:
		if len(b) < 4 {
			return fail(fmt.Errorf("%w: key of %d bytes", snapshotfmt.ErrCorrupt, len(key)))
		}
		l := int64(int32(binary.LittleEndian.Uint32(b)))
		if l < 0 || 4+l > int64(len(b)) {
			return fail(fmt.Errorf("%w: key part of %d bytes in a key of %d", snapshotfmt.ErrCorrupt, l, len(key)))
		}
		if cf.part == partPrefix {
			part = b[4 : 4+l]
		} else {
			part = b[4+l:]
		}
	}
	row, err := stripVersion(part, "key")
	if err != nil {
		return fail(err)
	}
	r, err := unsaferow.NewRow(row, len(cf.partSchema.Fields))
	if err != nil {
		return fail(err)
	}
	st := cf.partSchema
	for _, i := range cf.path {
		ft := st.Fields[i].Type
		if r.IsNull(i) {
			return cf, unsaferow.Row{}, true, nil
		}
		if r, err = r.Struct(i, len(ft.Fields)); err != nil {
			return fail(err)
		}
		st = ft
	}
	return cf, r, false, nil
}

// Values decodes a stored value of family cf into its rows: one for a
// value or map family, every element of a list (int32 LE length, then the
// version byte and the UnsafeRow; Spark's merge delimiter, delim bytes,
// between them).
func (t *TWS) Values(cf *ColumnFamily, value []byte, delim int) ([][]byte, error) {
	if !cf.List {
		row, err := stripVersion(value, "value")
		if err != nil {
			return nil, err
		}
		return [][]byte{row}, nil
	}
	var out [][]byte
	for len(value) > 0 {
		if len(value) < 4 {
			return nil, fmt.Errorf("%w: list element of %d bytes", snapshotfmt.ErrCorrupt, len(value))
		}
		n := int64(int32(binary.LittleEndian.Uint32(value)))
		if n < 1 || 4+n > int64(len(value)) {
			return nil, fmt.Errorf("%w: list element length %d of %d bytes", snapshotfmt.ErrCorrupt, n, len(value))
		}
		row, err := stripVersion(value[4:4+n], "list element")
		if err != nil {
			return nil, err
		}
		out = append(out, row)
		value = value[4+n:]
		if len(value) > 0 {
			value = value[min(delim, len(value)):]
		}
	}
	return out, nil
}

// readTWS reads the column families of a transformWithState operator's
// store from the schema file its v2 metadata names. The metadata holds an
// absolute URI (of wherever the checkpoint was written); rebucket reads
// the file at the same place under this checkpoint's state/<op>/.
func (c *Checkpoint) readTWS(op *Operator, s *Store, lists map[string]bool) error {
	if c.Provider != RocksDBProvider {
		return fmt.Errorf("%w: transformWithState store with the %s provider", snapshotfmt.ErrUnsupported, c.Provider)
	}
	if len(s.SchemaFilePaths) == 0 {
		return fmt.Errorf("%w: transformWithState store %q: the operator metadata names no state schema file", snapshotfmt.ErrCorrupt, s.Name)
	}
	uri := s.SchemaFilePaths[len(s.SchemaFilePaths)-1]
	marker := "/state/" + strconv.Itoa(op.ID) + "/"
	i := strings.LastIndex(uri, marker)
	if i < 0 {
		return fmt.Errorf("%w: state schema file %s is not under state/%d/", snapshotfmt.ErrCorrupt, uri, op.ID)
	}
	rel := uri[i+len(marker):]
	if rel == "" || strings.Contains(rel, "..") {
		return fmt.Errorf("%w: state schema file %s", snapshotfmt.ErrCorrupt, uri)
	}
	b, err := os.ReadFile(filepath.Join(op.Dir, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("%w: state schema file %s (looked for it at state/%d/%s of this checkpoint): %v", snapshotfmt.ErrCorrupt, uri, op.ID, rel, err)
	}
	cfs, err := parseSchemaV3(b)
	if err != nil {
		return err
	}
	g, err := groupingKey(cfs)
	if err != nil {
		return err
	}
	if err := sparkhash.Supported(g); err != nil {
		return err
	}
	for _, cf := range cfs {
		if err := cf.locate(g); err != nil {
			return err
		}
		cf.List = lists[cf.Name]
	}
	s.TWS = &TWS{Grouping: g, Families: cfs}
	s.KeySchemaJSON = g.JSON()
	s.KeySchemaErr = "transformWithState keys are laid out per column family"
	// The family ids are in the snapshots' metadata; Spark writes a
	// snapshot at the first version of a store with column families.
	for p := 0; p < c.Partitions; p++ {
		rp, err := ListRocksPartition(s.Dir(op.Dir, p))
		if err != nil {
			continue
		}
		z, _, err := rp.Plan(c.StateVersion())
		if err != nil || z == "" {
			continue
		}
		meta, err := ReadRocksZip(z)
		if err != nil {
			return err
		}
		return s.TWS.bindIDs(meta)
	}
	return fmt.Errorf("%w: transformWithState store %q: no partition has a snapshot (<v>.zip) naming the column family ids", snapshotfmt.ErrCorrupt, s.Name)
}

// bindIDs maps the families to their ids from the zip metadata of a
// partition (Spark assigns them in the same order in every partition;
// rebucket checks each zip it reads against the first).
func (t *TWS) bindIDs(meta *RocksZipMetadata) error {
	if t.byID != nil {
		for name, id := range meta.ColumnFamilyMapping {
			if cf := t.family(name); cf != nil && cf.ID != uint16(id) {
				return fmt.Errorf("%w: column family %q has id %d here and %d in another partition", snapshotfmt.ErrUnsupported, name, id, cf.ID)
			}
		}
		return nil
	}
	byID := map[uint16]*ColumnFamily{}
	for name, id := range meta.ColumnFamilyMapping {
		if cf := t.family(name); cf != nil {
			cf.ID = uint16(id)
			byID[uint16(id)] = cf
		} else if name != "default" {
			return fmt.Errorf("%w: column family %q of the snapshot is not in the state schema file", snapshotfmt.ErrCorrupt, name)
		}
	}
	for _, cf := range t.Families {
		if _, ok := meta.ColumnFamilyMapping[cf.Name]; !ok {
			return fmt.Errorf("%w: the snapshot has no id for column family %q", snapshotfmt.ErrCorrupt, cf.Name)
		}
	}
	t.byID = byID
	t.zipCF = meta.cfRaw
	return nil
}

func (t *TWS) family(name string) *ColumnFamily {
	for _, cf := range t.Families {
		if cf.Name == name {
			return cf
		}
	}
	return nil
}

// emptyZipMetadata is the metadata of an empty snapshot of this store,
// with its column family ids.
func (t *TWS) emptyZipMetadata() ([]byte, error) {
	m := map[string]any{"sstFiles": []any{}, "numKeys": 0, "numInternalKeys": 0}
	for k, v := range t.zipCF {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("v1\n"), b...), nil
}

// rewriteV2Metadata returns the v2 operator metadata raw with every
// store's numPartitions set to m and its schema file URIs moved from the
// source's location to dst's (both absolute): Spark reads the schema at
// the URI recorded, so a copy must name its own files.
func rewriteV2Metadata(raw []byte, m int, srcAbs, dstAbs string) ([]byte, error) {
	body, ok := bytes.CutPrefix(raw, []byte("v2\n"))
	if !ok {
		return nil, fmt.Errorf("%w: operator metadata version %q", snapshotfmt.ErrUnsupported, firstLine(raw))
	}
	line := firstLine(body)
	rest := body[len(line):]
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(line, &meta); err != nil {
		return nil, fmt.Errorf("%w: operator metadata: %v", snapshotfmt.ErrCorrupt, err)
	}
	var stores []map[string]json.RawMessage
	if err := json.Unmarshal(meta["stateStoreInfo"], &stores); err != nil {
		return nil, fmt.Errorf("%w: operator metadata stateStoreInfo: %v", snapshotfmt.ErrCorrupt, err)
	}
	for _, st := range stores {
		st["numPartitions"] = json.RawMessage(strconv.Itoa(m))
		var paths []string
		if p, ok := st["stateSchemaFilePaths"]; ok {
			if err := json.Unmarshal(p, &paths); err != nil {
				return nil, fmt.Errorf("%w: operator metadata stateSchemaFilePaths: %v", snapshotfmt.ErrCorrupt, err)
			}
			for i, u := range paths {
				paths[i] = moveURI(u, srcAbs, dstAbs)
			}
			b, _ := json.Marshal(paths)
			st["stateSchemaFilePaths"] = b
		}
	}
	b, err := json.Marshal(stores)
	if err != nil {
		return nil, err
	}
	meta["stateStoreInfo"] = b
	// Keep Spark's key order: operatorInfo, stateStoreInfo, operatorPropertiesJson.
	var out bytes.Buffer
	out.WriteString("v2\n{")
	for i, k := range []string{"operatorInfo", "stateStoreInfo", "operatorPropertiesJson"} {
		v, ok := meta[k]
		if !ok {
			continue
		}
		if i > 0 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
		delete(meta, k)
	}
	if len(meta) > 0 {
		return nil, fmt.Errorf("%w: operator metadata has fields rebucket does not know", snapshotfmt.ErrUnsupported)
	}
	out.WriteByte('}')
	out.Write(rest)
	return out.Bytes(), nil
}

// moveURI points a file URI under srcAbs at the same file under dstAbs; a
// URI under another directory (a checkpoint copied by hand) is moved by
// its state/ suffix.
func moveURI(u, srcAbs, dstAbs string) string {
	scheme, path, ok := strings.Cut(u, ":")
	if !ok || strings.Contains(scheme, "/") {
		scheme, path = "", u
	}
	path = strings.TrimPrefix(path, "//")
	var rel string
	if r, ok := strings.CutPrefix(path, srcAbs+"/"); ok {
		rel = r
	} else if i := strings.LastIndex(path, "/state/"); i >= 0 {
		rel = path[i+1:]
	} else {
		return u
	}
	out := filepath.ToSlash(filepath.Join(dstAbs, filepath.FromSlash(rel)))
	if scheme != "" {
		return scheme + ":" + out
	}
	return out
}

// writeV2Metadata writes state/<op>/_metadata/v2/<batch> of the copy in
// tmp (published as dstAbs): the operator's metadata with M partitions and
// schema URIs under dstAbs.
func writeV2Metadata(c *Checkpoint, op *Operator, tmp, dstAbs string, m int, batch int64) error {
	raw, err := os.ReadFile(op.MetadataPath)
	if err != nil {
		return err
	}
	srcAbs, err := filepath.Abs(c.Dir)
	if err != nil {
		return err
	}
	out, err := rewriteV2Metadata(raw, m, srcAbs, dstAbs)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(c.Dir, op.Dir)
	if err != nil {
		return err
	}
	return writeFileCRC(filepath.Join(tmp, rel, "_metadata", "v2", strconv.FormatInt(batch, 10)), out)
}
