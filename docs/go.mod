// Not a module anyone imports: this go.mod only keeps docs/ (the design
// notes, the journal, the benchmark results and their chart) out of the
// root module's zip, which every user of herald downloads and none needs
// these files from (docs/releasing.md, "What a module's zip holds").
module github.com/heraldgo/herald/docs

go 1.25.0
