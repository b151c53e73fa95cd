//! English text to IPA phonemes in the style of espeak-ng's `en-us` voice, which Piper voices were trained on,
//! without leaving the sandbox: words come from the CMU pronouncing dictionary (ARPAbet, mapped to IPA with
//! the stress mark before the stressed vowel), numbers are spelled out, and words the dictionary lacks are
//! spelled letter by letter.
//!
//! The dictionary is text, `word<TAB>ARPABET` per line, sorted by bytes, as set-up writes it
//! (`cmudict.txt`); it is binary-searched in place, so a request pays for the words it says, not for the
//! dictionary's 126 000 entries.

/// A sorted pronouncing dictionary.
pub struct Lexicon<'a> {
    text: &'a str,
}

impl<'a> Lexicon<'a> {
    pub fn new(text: &'a str) -> Self {
        Lexicon { text }
    }

    /// The ARPAbet pronunciation of `word` (lowercase).
    pub fn lookup(&self, word: &str) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        let (mut lo, mut hi) = (0usize, bytes.len());
        // `lo` and `hi` are always line starts (or the end).
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let start = bytes[lo..mid].iter().rposition(|&b| b == b'\n').map_or(lo, |i| lo + i + 1);
            let end = bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| start + i);
            let (entry, phones) = self.text[start..end].split_once('\t')?;
            match entry.as_bytes().cmp(word.as_bytes()) {
                std::cmp::Ordering::Equal => return Some(phones),
                std::cmp::Ordering::Less => lo = end + 1,
                std::cmp::Ordering::Greater => hi = start,
            }
        }
        None
    }
}

/// The IPA of one ARPAbet phone (stress digit removed), as espeak-ng writes it for American English.
fn ipa(phone: &str, stress: u8) -> &'static str {
    match phone {
        "AA" => "ɑː",
        "AE" => "æ",
        "AH" if stress == 0 => "ə",
        "AH" => "ʌ",
        "AO" => "ɔː",
        "AW" => "aʊ",
        "AY" => "aɪ",
        "EH" => "ɛ",
        "ER" if stress == 0 => "ɚ",
        "ER" => "ɜː",
        "EY" => "eɪ",
        "IH" => "ɪ",
        "IY" => "iː",
        "OW" => "oʊ",
        "OY" => "ɔɪ",
        "UH" => "ʊ",
        "UW" => "uː",
        "B" => "b",
        "CH" => "tʃ",
        "D" => "d",
        "DH" => "ð",
        "F" => "f",
        "G" => "ɡ",
        "HH" => "h",
        "JH" => "dʒ",
        "K" => "k",
        "L" => "l",
        "M" => "m",
        "N" => "n",
        "NG" => "ŋ",
        "P" => "p",
        "R" => "ɹ",
        "S" => "s",
        "SH" => "ʃ",
        "T" => "t",
        "TH" => "θ",
        "V" => "v",
        "W" => "w",
        "Y" => "j",
        "Z" => "z",
        "ZH" => "ʒ",
        _ => "",
    }
}

/// IPA of an ARPAbet pronunciation.
pub fn arpabet_to_ipa(phones: &str) -> String {
    let mut out = String::new();
    for phone in phones.split_whitespace() {
        let (base, stress) = match phone.as_bytes().last() {
            Some(d @ b'0'..=b'2') => (&phone[..phone.len() - 1], d - b'0'),
            _ => (phone, 0),
        };
        match stress {
            1 => out.push('ˈ'),
            2 => out.push('ˌ'),
            _ => {}
        }
        out.push_str(ipa(base, stress));
    }
    out
}

/// ARPAbet of each letter's name, for spelling out unknown words and abbreviations.
const LETTERS: [&str; 26] = [
    "EY1",
    "B IY1",
    "S IY1",
    "D IY1",
    "IY1",
    "EH1 F",
    "JH IY1",
    "EY1 CH",
    "AY1",
    "JH EY1",
    "K EY1",
    "EH1 L",
    "EH1 M",
    "EH1 N",
    "OW1",
    "P IY1",
    "K Y UW1",
    "AA1 R",
    "EH1 S",
    "T IY1",
    "Y UW1",
    "V IY1",
    "D AH1 B AH0 L Y UW0",
    "EH1 K S",
    "W AY1",
    "Z IY1",
];

/// `n` in English words, for the numbers a sign carries (up to 999 999 999; digit by digit beyond).
pub fn number_words(n: u64) -> String {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
    fn below_thousand(n: u64, out: &mut Vec<String>) {
        if n >= 100 {
            out.push(ONES[(n / 100) as usize].into());
            out.push("hundred".into());
        }
        match n % 100 {
            0 => {}
            r if r < 20 => out.push(ONES[r as usize].into()),
            r => {
                out.push(TENS[(r / 10) as usize].into());
                if r % 10 != 0 {
                    out.push(ONES[(r % 10) as usize].into());
                }
            }
        }
    }
    if n == 0 {
        return "zero".into();
    }
    if n >= 1_000_000_000 {
        let digits: Vec<&str> = n.to_string().bytes().map(|d| ONES[(d - b'0') as usize]).collect();
        return digits.join(" ");
    }
    let mut out = Vec::new();
    for (scale, name) in [(1_000_000, "million"), (1_000, "thousand")] {
        if !(n / scale).is_multiple_of(1000) {
            below_thousand(n / scale % 1000, &mut out);
            out.push(name.into());
        }
    }
    below_thousand(n % 1000, &mut out);
    out.join(" ")
}

/// The IPA phonemes of `text`: words separated by spaces, `,.!?;:` kept (the voice pauses on them).
pub fn phonemize(text: &str, lexicon: &Lexicon) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut token = String::new();
    let flush = |token: &mut String, words: &mut Vec<String>| {
        if token.is_empty() {
            return;
        }
        let word = std::mem::take(token);
        if word.bytes().all(|b| b.is_ascii_digit()) {
            let spoken = match word.parse::<u64>() {
                Ok(n) => number_words(n),
                Err(_) => word.bytes().map(|d| number_words(u64::from(d - b'0'))).collect::<Vec<_>>().join(" "),
            };
            words.extend(spoken.split(' ').filter_map(|w| lexicon.lookup(w).map(arpabet_to_ipa)));
            return;
        }
        let lower = word.to_lowercase();
        match lexicon.lookup(&lower) {
            Some(phones) => words.push(arpabet_to_ipa(phones)),
            None => {
                let spelled: Vec<String> = lower
                    .bytes()
                    .filter(u8::is_ascii_lowercase)
                    .map(|c| arpabet_to_ipa(LETTERS[(c - b'a') as usize]))
                    .collect();
                if !spelled.is_empty() {
                    words.push(spelled.join(" "));
                }
            }
        }
    };
    for c in text.chars() {
        match c {
            c if c.is_alphanumeric() || c == '\'' => token.push(c),
            ',' | '.' | '!' | '?' | ';' | ':' => {
                flush(&mut token, &mut words);
                if let Some(last) = words.last_mut() {
                    last.push(c);
                }
            }
            _ => flush(&mut token, &mut words),
        }
    }
    flush(&mut token, &mut words);
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DICT: &str = "'bout\tB AW1 T\nanytime\tEH1 N IY0 T AY2 M\nexit\tEH1 G Z AH0 T\nno\tN OW1\n\
                        parking\tP AA1 R K IH0 NG\nstop\tS T AA1 P\ntwelve\tT W EH1 L V\n";

    #[test]
    fn the_lexicon_is_searched_in_place() {
        let lexicon = Lexicon::new(DICT);
        for (word, phones) in [("'bout", "B AW1 T"), ("exit", "EH1 G Z AH0 T"), ("twelve", "T W EH1 L V")] {
            assert_eq!(lexicon.lookup(word), Some(phones), "{word}");
        }
        assert_eq!(lexicon.lookup("zebra"), None);
        assert_eq!(lexicon.lookup("a"), None);
        assert_eq!(Lexicon::new("").lookup("a"), None);
    }

    #[test]
    fn signs_become_espeak_style_ipa() {
        let lexicon = Lexicon::new(DICT);
        assert_eq!(phonemize("STOP", &lexicon), "stˈɑːp");
        assert_eq!(phonemize("EXIT 12", &lexicon), "ˈɛɡzət twˈɛlv");
        assert_eq!(phonemize("No parking, anytime!", &lexicon), "nˈoʊ pˈɑːɹkɪŋ, ˈɛniːtˌaɪm!");
        // Unknown words are spelled: "XB".
        assert_eq!(phonemize("xb", &lexicon), "ˈɛks bˈiː");
        assert_eq!(phonemize("  ..  ", &lexicon), "");
    }

    #[test]
    fn numbers_are_spelled_out() {
        assert_eq!(number_words(12), "twelve");
        assert_eq!(number_words(405), "four hundred five");
        assert_eq!(number_words(2_000_019), "two million nineteen");
        assert_eq!(number_words(1_000), "one thousand");
    }
}
