package testenv

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMariaDBTmpdirOfItsOwn: each MariaDB of the tests has a tmpdir of its own inside its
// directory. A mariadbd deletes the temporary tables ("#sql…" files) it finds in its tmpdir as
// it starts, so with /tmp shared one starting in another test package deleted those of another's
// mariadb-install-db, whose bootstrap failed ("Unknown table 'mysql.tmp_proxies_priv'").
func TestMariaDBTmpdirOfItsOwn(t *testing.T) {
	tmpdir := func(p *MariaDBProcess) string {
		db, err := sql.Open("mysql", p.DSN(""))
		require.NoError(t, err)
		defer db.Close()
		var dir string
		require.NoError(t, db.QueryRow("SELECT @@tmpdir").Scan(&dir))
		return dir
	}
	a, b := StartMariaDB(t), StartMariaDB(t)
	da, db := tmpdir(a), tmpdir(b)
	assert.NotEqual(t, da, db, "two servers share a tmpdir")
	assert.True(t, strings.HasPrefix(da, a.dir), "tmpdir %s is not in the server's directory %s", da, a.dir)
	assert.True(t, strings.HasPrefix(db, b.dir), "tmpdir %s is not in the server's directory %s", db, b.dir)
}
