package wire_test

import (
	"fmt"

	"github.com/lakeshore-dev/lakeshore/wire"
)

func ExampleMarshal() {
	latent, err := wire.NewNDArray([]int{2, 2}, []float32{0, 0.5, 1, 1.5})
	if err != nil {
		panic(err)
	}
	b, err := wire.Marshal(map[string]any{
		"prompt": "a lighthouse at dusk",
		"seed":   42,
		"size":   wire.Tuple{512, 512},
		"latent": latent,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(b), "bytes")

	v, err := wire.Decode(b)
	if err != nil {
		panic(err)
	}
	m := v.(map[string]any)
	fmt.Printf("%T %v\n", m["seed"], m["seed"])
	fmt.Printf("%T %v\n", m["size"], m["size"])
	values, err := wire.NDArrayValues[float32](m["latent"].(wire.NDArray))
	if err != nil {
		panic(err)
	}
	fmt.Println(m["latent"].(wire.NDArray).Shape, values)
	// Output:
	// 90 bytes
	// int64 42
	// wire.Tuple [512 512]
	// [2 2] [0 0.5 1 1.5]
}

func ExampleUnmarshal() {
	type Request struct {
		Prompt      string  `msgpack:"prompt"`
		Seed        int64   `msgpack:"seed"`
		Temperature float64 `json:"temperature"` // json tags work too
		Steps       int     `msgpack:"steps,omitempty"`
	}
	b, err := wire.Marshal(Request{Prompt: "a cat", Seed: 7, Temperature: 0.7})
	if err != nil {
		panic(err)
	}
	var req Request
	if err := wire.Unmarshal(b, &req); err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", req)

	var seed uint8
	err = wire.Unmarshal([]byte{0xcd, 0x01, 0x2c}, &seed) // 300
	fmt.Println(err)
	// Output:
	// {Prompt:a cat Seed:7 Temperature:0.7 Steps:0}
	// wire: cannot put int into uint8 at $: 300 overflows uint8
}
