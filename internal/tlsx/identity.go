// Package tlsx is the grid's public-key infrastructure: the certificates
// the daemon, the site agents and the operators' clients present to each
// other, how they are made (a CA of the grid's own, then one certificate
// per party), and the TLS configurations that use them, reloaded from
// their files when an operator replaces them.
//
// Every certificate the CA issues names its holder's role in the grid in
// a URI subject alternative name, besides the DNS names and addresses it
// is served at:
//
//	metasched:daemon                  the daemon (server and client)
//	metasched:agent:SITE              the agent of site SITE (server and client)
//	metasched:client:ROLE:NAME        an operator's or user's client (client only)
//	metasched:host:NAME               a hypervisor host's libvirt and QEMU (live migrations)
//
// A party checks the other's chain against the CA file it is given and
// then the identity: the daemon wants the agent of the site it calls,
// an agent wants the daemon (or an operator's client), and an agent's
// probe sink wants another agent. A certificate of one site cannot pass for
// another's, and a client certificate cannot serve.
//
// The design is described in docs/internals/security.md of the
// repository, "Identities and certificates".
package tlsx

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Kind is the role of a certificate's holder in the grid.
type Kind string

// The kinds of certificate.
const (
	KindDaemon Kind = "daemon"
	KindAgent  Kind = "agent"
	KindClient Kind = "client"
	// KindHost is a hypervisor host: its QEMU serves and sends live
	// migrations over TLS with it (libvirt's migrate_tls_x509_cert_dir).
	KindHost Kind = "host"
)

// Roles of a client certificate (and of the daemon's API tokens).
const (
	RoleUser     = "user"
	RoleOperator = "operator"
)

// uriScheme is the scheme of the identity URIs.
const uriScheme = "metasched"

// Identity is who a certificate's holder is.
type Identity struct {
	Kind Kind
	// Name is the site of an agent, the name of a client; "" for the
	// daemon.
	Name string
	// Role is a client's role (RoleUser or RoleOperator); "" otherwise.
	Role string
}

// Daemon is the daemon's identity.
func Daemon() Identity { return Identity{Kind: KindDaemon} }

// Agent is the identity of the agent of site.
func Agent(site string) Identity { return Identity{Kind: KindAgent, Name: site} }

// Host is the identity of the hypervisor host name.
func Host(name string) Identity { return Identity{Kind: KindHost, Name: name} }

// Client is the identity of a client of a role.
func Client(name, role string) Identity { return Identity{Kind: KindClient, Name: name, Role: role} }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$`)

// Check says what is wrong with id, naming the part.
func (id Identity) Check() error {
	switch id.Kind {
	case KindDaemon:
		if id.Name != "" || id.Role != "" {
			return fmt.Errorf("the daemon's identity has no name or role")
		}
		return nil
	case KindAgent, KindHost:
		if !nameRE.MatchString(id.Name) {
			field := map[Kind]string{KindAgent: "site", KindHost: "host"}[id.Kind]
			return fmt.Errorf("%s: must be 1 to 63 letters, digits, '.', '_' or '-' (starting with a letter or digit), not %q", field, id.Name)
		}
		if id.Role != "" {
			return fmt.Errorf("the identity of %s has no role", id.Kind)
		}
		return nil
	case KindClient:
		if !nameRE.MatchString(id.Name) {
			return fmt.Errorf("name: must be 1 to 63 letters, digits, '.', '_' or '-' (starting with a letter or digit), not %q", id.Name)
		}
		if id.Role != RoleUser && id.Role != RoleOperator {
			return fmt.Errorf("role: must be %s or %s, not %q", RoleUser, RoleOperator, id.Role)
		}
		return nil
	}
	return fmt.Errorf("kind: must be %s, %s, %s or %s, not %q", KindDaemon, KindAgent, KindClient, KindHost, id.Kind)
}

// URI is id as a certificate names it.
func (id Identity) URI() *url.URL {
	parts := []string{string(id.Kind)}
	switch id.Kind {
	case KindAgent, KindHost:
		parts = append(parts, id.Name)
	case KindClient:
		parts = append(parts, id.Role, id.Name)
	}
	return &url.URL{Scheme: uriScheme, Opaque: strings.Join(parts, ":")}
}

// String is id for messages: "the daemon", "the agent of site spain",
// "client alice (operator)".
func (id Identity) String() string {
	switch id.Kind {
	case KindDaemon:
		return "the daemon"
	case KindAgent:
		return "the agent of site " + id.Name
	case KindClient:
		return fmt.Sprintf("client %s (%s)", id.Name, id.Role)
	case KindHost:
		return "host " + id.Name
	}
	return "no metasched identity"
}

// IdentityOf reads the identity a certificate names (the one URI of
// scheme metasched among its subject alternative names).
func IdentityOf(c *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range c.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		id, err := identityOfURI(u)
		if err != nil {
			return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
		}
		found = append(found, id)
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("certificate %q names no metasched identity (make it with metasched tls cert)", c.Subject.CommonName)
	case 1:
		return found[0], nil
	}
	return Identity{}, fmt.Errorf("certificate %q names %d metasched identities: one only", c.Subject.CommonName, len(found))
}

// ParseIdentity reads an identity in its URI form (Identity.URI):
// metasched:daemon, metasched:agent:SITE, metasched:client:ROLE:NAME or
// metasched:host:NAME.
func ParseIdentity(s string) (Identity, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != uriScheme {
		return Identity{}, fmt.Errorf("%q is not a metasched identity (metasched:...)", s)
	}
	return identityOfURI(u)
}

func identityOfURI(u *url.URL) (Identity, error) {
	parts := strings.Split(u.Opaque, ":")
	var id Identity
	switch {
	case len(parts) == 1 && parts[0] == string(KindDaemon):
		id = Daemon()
	case len(parts) == 2 && parts[0] == string(KindAgent):
		id = Agent(parts[1])
	case len(parts) == 2 && parts[0] == string(KindHost):
		id = Host(parts[1])
	case len(parts) == 3 && parts[0] == string(KindClient):
		id = Client(parts[2], parts[1])
	default:
		return Identity{}, fmt.Errorf("the identity %q is not one of metasched:daemon, metasched:agent:SITE, metasched:client:ROLE:NAME", u)
	}
	if err := id.Check(); err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", u, err)
	}
	return id, nil
}
