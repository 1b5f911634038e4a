package keytype_test

import (
	"fmt"

	"github.com/rebucket/rebucket/engine/flink/keytype"
)

// Re-keying one state entry of a String-keyed operator from max parallelism
// 8 to 256: read the key after the old 1-byte prefix, hash it, write the new
// 2-byte prefix.
func Example() {
	codec, err := keytype.ForSerializer(keytype.ClassString, nil)
	if err != nil {
		panic(err)
	}
	composite := []byte{0x07, 0x04, 'k', '4', '2', 0x00} // kg 7 | "k42" | VoidNamespace
	old := keytype.PrefixBytes(8)
	n, err := codec.Len(composite[old:])
	if err != nil {
		panic(err)
	}
	hash, _ := codec.HashCode(composite[old : old+n])
	kg := keytype.KeyGroup(hash, 256)
	rekeyed := append(keytype.AppendKeyGroupPrefix(nil, kg, 256), composite[old:]...)
	key, _ := codec.Decode(composite[old : old+n])
	fmt.Printf("%q hash %d: key group %d of 256, subtask %d of 40, key %x\n",
		key, hash, kg, keytype.OperatorIndex(kg, 256, 40), rekeyed)
	// Output: "k42" hash 104489: key group 199 of 256, subtask 31 of 40, key 00c7046b343200
}

// Spelling a key for `locate`.
func ExampleCodec_Encode() {
	codec, _ := keytype.ForSerializer(keytype.ClassTuple, []string{keytype.ClassString, keytype.ClassLong})
	b, _ := codec.Encode(`["k1", 1]`)
	h, _ := codec.HashCode(b)
	fmt.Printf("%s %x hash %d key group %d of 8\n", codec.Name(), b, h, keytype.KeyGroup(h, 8))
	// Output: Tuple2<String,Long> 036b310000000000000001 hash 104347 key group 2 of 8
}

func ExampleForSerializer_unsupported() {
	_, err := keytype.ForSerializer("org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot", nil)
	fmt.Println(err)
	// Output: unsupported Flink key type: key serializer org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot: POJO keys hash with user code (their hashCode()); rebucket rehashes keys of Flink's built-in String, Long, Integer, Short, Byte, Boolean, Character, Double and Float serializers, Tuples and Rows of them, and Table/SQL (RowData) keys
}
