package virt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// Images on hosts. The files of an image are put onto a host as volumes
// of a "dir" storage pool on a directory of the host (a transient pool of
// the host's daemon, named after the directory), uploaded through
// libvirt's stream API when missing: the host needs no other access than
// its libvirt connection, which may be remote. A volume's name carries
// the start of its content's SHA-256, and a volume found there is checked
// against it (downloaded and hashed) the first time this connection sees
// it, so that an upload cut short is never booted.

// imagePoolPrefix starts the names of the image pools.
const imagePoolPrefix = "metasched-images-"

// imageVolume matches the names of image volumes (PutImage's callers name
// them by the start of their content's SHA-256): anything else in the
// directory (the overlays' directory) is left alone.
var imageVolume = regexp.MustCompile(`^[0-9a-f]{16}-`)

// uploadChunk is the size of one piece of an upload or a download.
const uploadChunk = 1 << 20

// PutImage makes the files present in dir on the host and returns the
// paths of their volumes there, in order.
func (h *Host) PutImage(ctx context.Context, dir string, files []hp.ImageFile) ([]string, error) {
	conn, err := h.connection(ctx)
	if err != nil {
		return nil, err
	}
	pool, err := h.dirPool(conn, imagePoolPrefix, dir, true)
	if err != nil {
		return nil, err
	}
	defer pool.Free()
	paths := make([]string, len(files))
	for i, f := range files {
		if paths[i], err = h.putFile(ctx, conn, pool, f); err != nil {
			return nil, fmt.Errorf("put %s on %s: %w", f.Name, h.uri, err)
		}
	}
	return paths, nil
}

// PruneImages deletes the volumes of the image pool on dir that keep
// does not name.
func (h *Host) PruneImages(ctx context.Context, dir string, keep []string) error {
	conn, err := h.connection(ctx)
	if err != nil {
		return err
	}
	pool, err := h.dirPool(conn, imagePoolPrefix, dir, true)
	if err != nil {
		return err
	}
	defer pool.Free()
	vols, err := pool.ListAllStorageVolumes(0)
	if err != nil {
		return wrap(err, "list the images on %s", h.uri)
	}
	var errs []error
	for i := range vols {
		v := &vols[i]
		name, err := v.GetName()
		if err == nil && imageVolume.MatchString(name) && !slices.Contains(keep, name) {
			if err = v.Delete(0); err == nil {
				h.mu.Lock()
				delete(h.verified, name)
				h.mu.Unlock()
			}
		}
		if err != nil {
			errs = append(errs, wrap(err, "delete image volume %s on %s", name, h.uri))
		}
		v.Free()
	}
	return errors.Join(errs...)
}

// putFile makes one file present in pool: a volume found is kept when
// its content's hash is the file's, else replaced.
func (h *Host) putFile(ctx context.Context, conn *libvirt.Connect, pool *libvirt.StoragePool, f hp.ImageFile) (string, error) {
	if vol, err := pool.LookupStorageVolByName(f.Name); err == nil {
		defer vol.Free()
		ok, err := h.holds(conn, vol, f)
		if err != nil {
			return "", err
		}
		if ok {
			return volPath(vol)
		}
		h.log.Warn().Str("volume", f.Name).Str("host", h.uri).Msg("an image volume does not hold its file (an upload cut short?): made again")
		if err := vol.Delete(0); err != nil {
			return "", wrap(err, "delete volume %s", f.Name)
		}
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return "", err
	}
	defer src.Close()
	x, err := xml.Marshal(xmlRawVolume{Type: "file", Name: f.Name, Capacity: strconv.FormatInt(f.Size, 10), Mode: "0644"})
	if err != nil {
		return "", err
	}
	vol, err := pool.StorageVolCreateXML(string(x), 0)
	if err != nil {
		return "", wrap(err, "make volume %s", f.Name)
	}
	defer vol.Free()
	if err := upload(ctx, conn, vol, src, f.Size); err != nil {
		if derr := vol.Delete(0); derr != nil {
			err = errors.Join(err, wrap(derr, "delete the half-uploaded volume %s", f.Name))
		}
		return "", err
	}
	h.mu.Lock()
	h.verified[f.Name] = true
	h.mu.Unlock()
	return volPath(vol)
}

// holds says whether vol holds f: known from this connection's own
// upload or check, or else downloaded and hashed.
func (h *Host) holds(conn *libvirt.Connect, vol *libvirt.StorageVol, f hp.ImageFile) (bool, error) {
	h.mu.Lock()
	known := h.verified[f.Name]
	h.mu.Unlock()
	if known {
		return true, nil
	}
	info, err := vol.GetInfo()
	if err != nil {
		return false, wrap(err, "volume %s", f.Name)
	}
	if int64(info.Capacity) != f.Size {
		return false, nil
	}
	st, err := conn.NewStream(0)
	if err != nil {
		return false, wrap(err, "stream for volume %s", f.Name)
	}
	defer st.Free()
	if err := vol.Download(st, 0, uint64(f.Size), 0); err != nil {
		return false, wrap(err, "download volume %s", f.Name)
	}
	sum := sha256.New()
	buf := make([]byte, uploadChunk)
	for {
		n, err := st.Recv(buf)
		if err != nil {
			// Shorter than it says (a file cut short): not the file.
			st.Abort()
			h.log.Warn().Err(err).Str("volume", f.Name).Str("host", h.uri).Msg("an image volume cannot be read whole")
			return false, nil
		}
		if n == 0 {
			break
		}
		sum.Write(buf[:n])
	}
	if err := st.Finish(); err != nil {
		return false, nil
	}
	ok := hex.EncodeToString(sum.Sum(nil)) == f.SHA256
	if ok {
		h.mu.Lock()
		h.verified[f.Name] = true
		h.mu.Unlock()
	}
	return ok, nil
}

// upload sends size bytes of src into vol.
func upload(ctx context.Context, conn *libvirt.Connect, vol *libvirt.StorageVol, src io.Reader, size int64) error {
	st, err := conn.NewStream(0)
	if err != nil {
		return wrap(err, "stream")
	}
	defer st.Free()
	if err := vol.Upload(st, 0, uint64(size), 0); err != nil {
		return wrap(err, "upload")
	}
	buf := make([]byte, uploadChunk)
	for sent := int64(0); sent < size; {
		if err := ctx.Err(); err != nil {
			st.Abort()
			return err
		}
		n, rerr := io.ReadFull(src, buf[:min(int64(len(buf)), size-sent)])
		if rerr != nil {
			st.Abort()
			return fmt.Errorf("read the image file: %w", rerr)
		}
		for off := 0; off < n; {
			m, err := st.Send(buf[off:n])
			if err != nil {
				st.Abort()
				return wrap(err, "upload")
			}
			off += m
		}
		sent += int64(n)
	}
	if err := st.Finish(); err != nil {
		return wrap(err, "upload")
	}
	return nil
}

// xmlRawVolume is a raw file volume of a given size.
type xmlRawVolume struct {
	XMLName  xml.Name `xml:"volume"`
	Type     string   `xml:"type,attr"`
	Name     string   `xml:"name"`
	Capacity string   `xml:"capacity"`
	Mode     string   `xml:"target>permissions>mode"`
}

func volPath(vol *libvirt.StorageVol) (string, error) {
	p, err := vol.GetPath()
	if err != nil {
		return "", wrap(err, "volume path")
	}
	return p, nil
}
