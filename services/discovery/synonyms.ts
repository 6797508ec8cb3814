// Query-side vocabulary of discovery: phrases rewritten before tokenising, words that say nothing about the agent
// wanted, and synonyms a buyer types for what agents call otherwise. Curated for the marketplace's domains.

/** Rewritten on the lower-cased text before it is split into words (first match wins, left to right). */
export const PHRASES: ReadonlyArray<readonly [RegExp, string]> = [
  [/\btl\s*[;:,.\s]\s*dr\b/gu, " tldr "],
  [/\btoo long[,;\s]+didn'?t read\b/gu, " tldr "],
  [/\btime[\s-]+zones?\b/gu, " timezone "],
  [/\be-mails?\b/gu, " email "],
  [/\be-commerce\b/gu, " ecommerce "],
  [/\bexchange rates?\b/gu, " currency "],
  [/\bspeech[\s-]+to[\s-]+text\b/gu, " speech to text transcribe "],
  [/\btext[\s-]+to[\s-]+speech\b/gu, " text to speech tts "]
]

/** Words of requests rather than of agents ("I need an agent that can ..."), dropped unless nothing else is left. */
export const FILLER: ReadonlySet<string> = new Set([
  "agent", "agents", "need", "needs", "want", "wants", "wanted", "looking", "find", "something", "someone", "please",
  "can", "could", "would", "should", "like", "able", "thing", "things", "way", "use", "using", "service", "services",
  "tool", "tools", "get", "make", "do", "does", "my", "me", "i", "some", "any", "good", "best", "help"
])

/**
 * Words and what else to look for when a buyer types them. A set lists words that mean the same in a query; each
 * member looks for all the others. Stemming already joins inflections (translate, translation, translator).
 */
const SETS: ReadonlyArray<ReadonlyArray<string>> = [
  ["summarize", "summary", "summaries", "summarization", "tldr", "digest", "recap", "gist", "condense"],
  ["image", "images", "picture", "pictures", "photo", "photos", "photograph", "pic", "pics", "img"],
  ["tag", "tags", "tagging", "label", "labels", "labeling", "labelling"],
  ["transcribe", "transcription", "transcript", "transcripts"],
  ["analyze", "analysis", "analyse"],
  ["parse", "parser", "parsing"],
  ["scrape", "scraper", "scraping", "crawl", "crawler"],
  ["website", "websites", "web", "webpage", "site"],
  ["chart", "charts", "graph", "plot", "visualization", "visualize"],
  ["crypto", "cryptocurrency", "cryptocurrencies", "bitcoin", "btc", "ethereum", "eth"],
  ["currency", "currencies", "forex", "fx", "dollar", "dollars", "euro", "euros", "usd", "eur", "gbp", "yen"],
  ["stock", "stocks", "equity", "equities"],
  ["flight", "flights", "airfare", "airline"],
  ["hotel", "hotels", "accommodation", "lodging"],
  ["price", "prices", "pricing", "cost", "costs"],
  ["cheap", "cheapest", "inexpensive", "affordable"],
  ["bug", "bugs", "defect", "defects"],
  ["vulnerability", "vulnerabilities", "vuln", "exploit"],
  ["resume", "resumes", "cv", "cvs"],
  ["email", "emails", "mail", "inbox"],
  ["spam", "junk"],
  ["fraud", "scam", "scams"],
  ["sentiment", "opinion", "opinions"],
  ["tweet", "tweets", "twitter", "social"],
  ["car", "cars", "vehicle", "vehicles"],
  ["legal", "law", "lawyer"],
  ["medical", "clinical", "doctor"],
  ["csv", "spreadsheet", "excel"],
  ["speech", "voice", "spoken"],
  ["audio", "recording", "recordings", "sound"],
  ["detect", "detection", "detector", "identify"]
]

/** Directed expansions: the word also looks for its broader terms (rain is weather, not every weather is rain). */
const BROADER: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["rain", ["weather", "forecast"]],
  ["snow", ["weather"]],
  ["wind", ["weather"]],
  ["storm", ["weather"]],
  ["sunny", ["weather"]],
  ["temperature", ["weather"]],
  ["pollution", ["air"]],
  ["smog", ["air", "pollution"]],
  ["ocr", ["text", "recognition"]],
  ["tts", ["speech"]],
  ["stt", ["transcribe"]],
  ["localise", ["localization", "translate"]],
  ["localize", ["localization", "translate"]]
]

const build = () => {
  const map = new Map<string, Set<string>>()
  const add = (word: string, others: ReadonlyArray<string>) => {
    const set = map.get(word) ?? new Set<string>()
    for (const other of others) if (other !== word) set.add(other)
    map.set(word, set)
  }
  for (const set of SETS) for (const word of set) add(word, set)
  for (const [word, broader] of BROADER) add(word, broader)
  return map
}

export const SYNONYMS: ReadonlyMap<string, ReadonlySet<string>> = build()
