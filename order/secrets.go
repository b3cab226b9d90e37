package order

import (
	"fmt"
	"os"
	"strings"
)

// secretSetting is the value of a setting that may also come from a file, as the official
// container images read their secrets (MYSQL_PASSWORD_FILE and the like): value is what the flag
// or the variable NAME gave, file the path NAME_FILE gave. It returns value, or the file's
// content without its trailing line breaks; both set, an unreadable file or an empty one is an
// error that names the setting. Neither set returns "".
func secretSetting(name, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s_FILE are both set: set one", name, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s_FILE: %s is empty", name, file)
	}
	return s, nil
}
