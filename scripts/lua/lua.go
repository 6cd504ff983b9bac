// Package lua embeds the project's Redis Lua scripts so that every binary carries them.
//
// go:embed cannot reach a parent directory, so the scripts live beside this file and the
// packages that run them import this one. Each script's header names its KEYS and ARGV.
package lua

import _ "embed"

// Unlock is unlock.lua: delete KEYS[1] only if it still holds ARGV[1].
//
//go:embed unlock.lua
var Unlock string
