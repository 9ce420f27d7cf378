package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// An agent does not start with an image it cannot use: a directory
// without an image file, and an image whose kernel is not the file its
// sum names, are both reported, each by its pool's field and its path.
// A good image on a test-driver host changes nothing: the test driver
// boots nothing.
func TestAgentImages(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.MkdirAll(good, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "vmlinuz"), []byte("a kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "image.yaml"), []byte("kind: kernel\nkernel: vmlinuz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	altered := filepath.Join(dir, "altered")
	if err := os.MkdirAll(altered, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(altered, "vmlinuz"), []byte("another kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(altered, "image.yaml"), []byte("kind: kernel\nkernel: vmlinuz\nkernel_sha256: "+strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}

	site := func(images string) *hp.Site {
		s, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(fmt.Sprintf(`site: lab
token_file: token
insecure_http: true
images: %s
hosts:
  - {name: h-0, uri: "test:///default", pool: render}
`, images)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	_, err := hp.New(context.Background(), hp.Config{Site: site(fmt.Sprintf("{render: %q, batch: %q, web: %q}", good, altered, missing)),
		Token: testToken, Connect: virt.Connector(log), Logger: log})
	if err == nil || !errors.Is(err, hp.ErrInvalid) {
		t.Fatalf("New with bad images: %v, want ErrInvalid", err)
	}
	for _, want := range []string{"images.batch: image " + altered + ": kernel", "SHA-256", "images.web: image " + missing} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "images.render") {
		t.Errorf("error %q blames the good image", err)
	}

	c := serveAgent(t, hp.Config{Site: site(fmt.Sprintf("{render: %q}", good)), Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	vm, err := c.Create(context.Background(), hp.VMSpec{Name: "v-1", VCPUs: 1, MemoryMiB: 64, Image: "render"})
	if err != nil || vm.BootSeconds != 0 {
		t.Fatalf("create on a test host with an image: %+v, %v", vm, err)
	}
	// An image the site does not have is refused, naming the ones it has;
	// so is a reconfiguration for it.
	_, err = c.Create(context.Background(), hp.VMSpec{Name: "v-2", VCPUs: 1, MemoryMiB: 64, Image: "debian"})
	if !errors.Is(err, hp.ErrInvalid) || !strings.Contains(err.Error(), `image: "debian" is not an image of site lab (it has render)`) {
		t.Errorf("create with an unknown image: %v", err)
	}
	_, err = c.Reconfigure(context.Background(), "h-0", hp.Reconfigure{Pool: "batch", Image: "debian"})
	if !errors.Is(err, hp.ErrInvalid) || !strings.Contains(err.Error(), `image: "debian" is not an image of site lab`) {
		t.Errorf("reconfigure for an unknown image: %v", err)
	}
	_, err = c.Create(context.Background(), hp.VMSpec{Name: "v-3", VCPUs: 1, MemoryMiB: 64, Image: "Deb ian"})
	if !errors.Is(err, hp.ErrInvalid) || !strings.Contains(err.Error(), `image: must be an image name`) {
		t.Errorf("create with a bad image name: %v", err)
	}
}
