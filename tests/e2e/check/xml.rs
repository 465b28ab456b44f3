//! Just enough of an XML parser to tell a well-formed document and walk it: elements,
//! attributes, character data and references, comments and the declaration.

#[derive(Debug)]
pub struct Element {
    pub name: String,
    attrs: Vec<(String, String)>,
    nodes: Vec<Node>,
}

#[derive(Debug)]
enum Node {
    Element(Element),
    Text(String),
}

impl Element {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn children(&self, name: &str) -> Vec<&Element> {
        self.nodes
            .iter()
            .filter_map(|n| match n {
                Node::Element(e) if e.name == name => Some(e),
                _ => None,
            })
            .collect()
    }

    pub fn text(&self) -> String {
        self.nodes
            .iter()
            .filter_map(|n| match n {
                Node::Text(t) => Some(t.as_str()),
                Node::Element(_) => None,
            })
            .collect()
    }
}

struct Parser<'a> {
    s: &'a str,
    at: usize,
}

pub fn parse(s: &str) -> Result<Element, String> {
    let mut p = Parser { s, at: 0 };
    if p.rest().starts_with("<?xml") {
        p.at += p.rest().find("?>").ok_or("unterminated declaration")? + 2;
    }
    p.misc()?;
    let root = p.element()?;
    p.misc()?;
    if p.at != s.len() {
        return Err(format!("content after the root element at {}", p.at));
    }
    Ok(root)
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.at..]
    }

    fn skip_space(&mut self) {
        let n = self.rest().len() - self.rest().trim_start().len();
        self.at += n;
    }

    fn misc(&mut self) -> Result<(), String> {
        loop {
            self.skip_space();
            if self.rest().starts_with("<!--") {
                self.at += self.rest().find("-->").ok_or("unterminated comment")? + 3;
            } else {
                return Ok(());
            }
        }
    }

    fn name(&mut self) -> Result<String, String> {
        let n = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')))
            .unwrap_or(self.rest().len());
        if n == 0 {
            return Err(format!("expected a name at {}", self.at));
        }
        let name = self.rest()[..n].to_string();
        self.at += n;
        Ok(name)
    }

    fn expect(&mut self, token: &str) -> Result<(), String> {
        if self.rest().starts_with(token) {
            self.at += token.len();
            Ok(())
        } else {
            Err(format!(
                "expected {token:?} at {}: {:?}",
                self.at,
                &self.rest()[..self.rest().len().min(30)]
            ))
        }
    }

    fn element(&mut self) -> Result<Element, String> {
        self.expect("<")?;
        let name = self.name()?;
        let mut attrs: Vec<(String, String)> = Vec::new();
        loop {
            let before = self.at;
            self.skip_space();
            if self.rest().starts_with("/>") {
                self.at += 2;
                return Ok(Element {
                    name,
                    attrs,
                    nodes: Vec::new(),
                });
            }
            if self.rest().starts_with('>') {
                self.at += 1;
                break;
            }
            if self.at == before {
                return Err(format!("expected a space before an attribute at {}", self.at));
            }
            let attr = self.name()?;
            self.expect("=\"")?;
            let end = self.rest().find('"').ok_or("unterminated attribute")?;
            let raw = &self.rest()[..end];
            if raw.contains('<') {
                return Err(format!("'<' in attribute {attr}"));
            }
            let value = unescape(raw)?;
            self.at += end + 1;
            if attrs.iter().any(|(n, _)| *n == attr) {
                return Err(format!("duplicate attribute {attr}"));
            }
            attrs.push((attr, value));
        }
        let mut nodes = Vec::new();
        loop {
            if self.rest().starts_with("</") {
                self.at += 2;
                let end = self.name()?;
                if end != name {
                    return Err(format!("</{end}> closes <{name}>"));
                }
                self.skip_space();
                self.expect(">")?;
                return Ok(Element { name, attrs, nodes });
            }
            if self.rest().starts_with("<!--") {
                self.misc()?;
            } else if self.rest().starts_with('<') {
                nodes.push(Node::Element(self.element()?));
            } else {
                let end = self.rest().find('<').ok_or(format!("<{name}> is not closed"))?;
                let raw = &self.rest()[..end];
                if raw.contains("]]>") {
                    return Err("']]>' in character data".into());
                }
                nodes.push(Node::Text(unescape(raw)?));
                self.at += end;
            }
        }
    }
}

fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let end = rest[amp..].find(';').ok_or("unterminated reference")? + amp;
        let entity = &rest[amp + 1..end];
        let c = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            e => {
                let code = match e.strip_prefix("#x") {
                    Some(hex) => u32::from_str_radix(hex, 16),
                    None => e.strip_prefix('#').ok_or(format!("unknown entity &{e};"))?.parse(),
                }
                .map_err(|_| format!("bad reference &{e};"))?;
                char::from_u32(code).ok_or(format!("bad character &{e};"))?
            }
        };
        out.push(c);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    if out
        .chars()
        .any(|c| (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r'))
    {
        return Err("a control character XML does not allow".into());
    }
    Ok(out)
}

#[test]
fn the_parser_tells_well_formed_from_broken() {
    let root = parse("<?xml version=\"1.0\"?>\n<a x=\"1 &amp; &lt;2&gt;\"><b/><b>t&#38;&#x3c;</b></a>\n").unwrap();
    assert_eq!(root.attr("x"), Some("1 & <2>"));
    assert_eq!(root.children("b").len(), 2);
    assert_eq!(root.children("b")[1].text(), "t&<");
    for bad in [
        "<a>",
        "<a></b>",
        "<a x=\"<\"/>",
        "<a>&bogus;</a>",
        "<a/><b/>",
        "<a x=\"1\" x=\"2\"/>",
        "<a>\u{1}</a>",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}
