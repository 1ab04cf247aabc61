module github.com/limiter-dev/limiter/client

go 1.24
