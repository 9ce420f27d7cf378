package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/metasched/metasched/metasched/store/kv"
)

// bucketTokens holds the API tokens the operator made: name → TokenRecord
// (the token itself is never kept, only its SHA-256).
var bucketTokens = []byte("tokens")

// TokenRecord is an API token as the store keeps it.
type TokenRecord struct {
	Name    string    `json:"name"`
	Role    string    `json:"role"`
	Hash    string    `json:"hash"` // hex SHA-256 of the token
	Created time.Time `json:"created"`
}

// HashToken is the hex SHA-256 of a token, as TokenRecord keeps it.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// CreateToken makes a token of role named name (a new name: ErrConflict
// otherwise) from 32 random bytes and keeps its hash; it returns the
// record and the token, which is not kept and cannot be read again.
func (s *Store) CreateToken(ctx context.Context, name, role string) (TokenRecord, string, error) {
	if name == "" || role == "" {
		return TokenRecord{}, "", fmt.Errorf("create token: empty name or role: %w", ErrInvalid)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return TokenRecord{}, "", fmt.Errorf("create token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	r := TokenRecord{Name: name, Role: role, Hash: HashToken(token), Created: s.stamp()}
	v, err := json.Marshal(r)
	if err != nil {
		return TokenRecord{}, "", err
	}
	err = s.batch(ctx, func(tx kv.Tx) error {
		b := tx.Bucket(bucketTokens)
		if b.Get([]byte(name)) != nil {
			return fmt.Errorf("token %q exists: %w", name, ErrConflict)
		}
		return b.Put([]byte(name), v)
	})
	if err != nil {
		return TokenRecord{}, "", fmt.Errorf("create token: %w", err)
	}
	return r, token, nil
}

// Tokens returns every token's record, by name.
func (s *Store) Tokens(ctx context.Context) ([]TokenRecord, error) {
	var out []TokenRecord
	err := s.view(ctx, func(tx kv.Tx) error {
		return tx.Bucket(bucketTokens).ForEach(func(k, v []byte) error {
			var r TokenRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("token %q: %w: %w", k, ErrCorrupt, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return out, nil
}

// RevokeToken forgets the token named name (ErrNotFound when there is
// none): it authenticates nothing from then on.
func (s *Store) RevokeToken(ctx context.Context, name string) error {
	err := s.batch(ctx, func(tx kv.Tx) error {
		b := tx.Bucket(bucketTokens)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("token %q: %w", name, ErrNotFound)
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	return nil
}
