package keytype

import (
	"strconv"
	"strings"
)

// typeNames maps the key type names a user types (`locate --key-type`) to
// snapshot classes.
var typeNames = map[string]string{
	"string": ClassString, "long": ClassLong, "int": ClassInt, "integer": ClassInt,
	"short": ClassShort, "byte": ClassByte, "boolean": ClassBoolean, "bool": ClassBoolean,
	"char": ClassChar, "character": ClassChar, "double": ClassDouble, "float": ClassFloat,
	"rowdata": ClassRowData, "sql": ClassRowData,
}

// ForName returns the codec for a key type spelled by a user, case-insensitive:
// string, long, int, short, byte, boolean, char, double, float, rowdata (a
// Table/SQL key), and composites tuple<string,long> (or tuple2<...>) and
// row<string,long>, which nest. Codec.Name() spellings are accepted too.
// Unknown names give an error wrapping snapshotfmt.ErrInvalidArgument.
func ForName(name string) (Codec, error) {
	s, rest, err := parseTypeName(strings.ToLower(strings.Join(strings.Fields(name), "")), 0)
	if err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, invalidf("key type %q: unexpected %q", name, rest)
	}
	c, err := ForSpec(s)
	if err != nil {
		return nil, invalidf("key type %q: %v", name, err)
	}
	return c, nil
}

func parseTypeName(s string, depth int) (Spec, string, error) {
	if depth > maxDepth {
		return Spec{}, "", invalidf("key type nested deeper than %d levels", maxDepth)
	}
	i := strings.IndexAny(s, "<,>")
	if i < 0 {
		i = len(s)
	}
	word, rest := s[:i], s[i:]
	if c, ok := typeNames[word]; ok {
		return Spec{Class: c}, rest, nil
	}
	var class string
	switch {
	case word == "row":
		class = ClassRow
	case strings.HasPrefix(word, "tuple") && strings.Trim(word[5:], "0123456789") == "":
		class = ClassTuple
	default:
		return Spec{}, "", invalidf("unknown key type %q (want string, long, int, short, byte, boolean, char, double, float, rowdata, tuple<...> or row<...>)", word)
	}
	if !strings.HasPrefix(rest, "<") {
		return Spec{}, "", invalidf("key type %s needs its fields, e.g. %s<string,long>", word, word)
	}
	rest = rest[1:]
	sp := Spec{Class: class}
	for {
		f, r, err := parseTypeName(rest, depth+1)
		if err != nil {
			return Spec{}, "", err
		}
		sp.Nested = append(sp.Nested, f)
		switch {
		case strings.HasPrefix(r, ","):
			rest = r[1:]
		case strings.HasPrefix(r, ">"):
			if n := strings.TrimPrefix(word, "tuple"); class == ClassTuple && n != "" && n != strconv.Itoa(len(sp.Nested)) {
				return Spec{}, "", invalidf("key type %s has %d fields", word, len(sp.Nested))
			}
			return sp, r[1:], nil
		default:
			return Spec{}, "", invalidf("key type %s: missing '>'", word)
		}
	}
}
