package domxml

import (
	"encoding/xml"
	"strings"
)

// elem is an XML element for the small writer below, which prints in
// libvirt's own style: two-space indentation, attributes in single quotes,
// empty elements self-closed. Attributes are printed in the order given.
type elem struct {
	name  string
	attrs []attr
	text  string // character data; an element has text or kids, not both
	kids  []*elem
}

type attr struct{ name, value string }

func el(name string, attrs []attr, kids ...*elem) *elem {
	return &elem{name: name, attrs: attrs, kids: kids}
}

func textEl(name string, attrs []attr, text string) *elem {
	return &elem{name: name, attrs: attrs, text: text}
}

// a builds an attribute list from name, value pairs.
func a(nv ...string) []attr {
	as := make([]attr, 0, len(nv)/2)
	for i := 0; i+1 < len(nv); i += 2 {
		as = append(as, attr{nv[i], nv[i+1]})
	}
	return as
}

// String renders e and its children, ending with a newline.
func (e *elem) String() string {
	var b strings.Builder
	e.write(&b, 0)
	return b.String()
}

func (e *elem) write(b *strings.Builder, depth int) {
	b.WriteString(strings.Repeat("  ", depth))
	b.WriteByte('<')
	b.WriteString(e.name)
	for _, at := range e.attrs {
		b.WriteByte(' ')
		b.WriteString(at.name)
		b.WriteString("='")
		escape(b, at.value)
		b.WriteByte('\'')
	}
	switch {
	case len(e.kids) > 0:
		b.WriteString(">\n")
		for _, k := range e.kids {
			k.write(b, depth+1)
		}
		b.WriteString(strings.Repeat("  ", depth))
	case e.text != "":
		b.WriteByte('>')
		escape(b, e.text)
	default:
		b.WriteString("/>\n")
		return
	}
	b.WriteString("</")
	b.WriteString(e.name)
	b.WriteString(">\n")
}

// escape writes s with &, <, >, ', " and control characters escaped, so it
// is safe both as character data and inside a single-quoted attribute.
func escape(b *strings.Builder, s string) {
	_ = xml.EscapeText(b, []byte(s)) // a strings.Builder never fails
}
