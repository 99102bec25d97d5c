//go:build !linux

package sockio

import "syscall"

// rawCalls is false off Linux: Writers write through net.
const rawCalls = false

func writeRaw(uintptr, [][]byte) (int, syscall.Errno) { panic("sockio: no raw calls here") }

func Read(uintptr, []byte) (int, syscall.Errno) { panic("sockio: no raw calls here") }
