// The servers that scripts/services.sh, scripts/cluster.sh and the load and chaos tests start
// keep their data under run/ (MySQL's data directory among them, where a test's CREATE DATABASE
// and DROP DATABASE make and remove directories). This go.mod makes run/ a module of its own, so
// that the go command's ./... patterns (go test, go vet, go list) never walk into it: a directory
// removed while go walked the tree failed the walk ("cannot find package").
module seckill.invalid/run
