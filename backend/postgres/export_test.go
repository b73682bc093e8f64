package postgres

// Rename rewrites SQL written with the default names (public, locker) to schema's, as SchemaSQL
// does with WithTable(schema, "locker"): for tests that run SQL of their own.
func Rename(schema, text string) string { return names{schema: schema, name: "locker"}.rename(text) }
