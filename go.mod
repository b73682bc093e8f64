module github.com/hashlock/locker

go 1.26
