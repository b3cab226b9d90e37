package sale

import (
	"testing"

	"github.com/zkstock/zkstock/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "MYSQL_DSN", "REDIS_ADDR") }
