package postgres

import (
	"embed"
	"io/fs"

	"github.com/n8n-guard/n8n-guard/internal/migrate"
)

// The schema of the PostgreSQL store: numbered SQL files, applied by
// internal/migrate at Open.
//
//go:embed migrations/*.sql
var migrations embed.FS

func schema() migrate.Schema {
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the folder is embedded above
	}
	return migrate.Schema{
		Name:  "keystore",
		Files: files,
		Table: "guard_schema_migrations",
		Lock:  0x6e386e67, // "n8ng"
	}
}
