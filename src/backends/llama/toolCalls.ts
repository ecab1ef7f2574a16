// Function calls and thought segments in a local generation: the call syntax (the chat template's own, or a
// documented plain-text one for template-less models), the grammars that force calls, the splitter that turns the
// model's raw output into answer / reasoning / function_call pieces, and the re-rendering of delivered pieces on resume.
// Thought delimiters and each family's answer syntax come from thoughtSyntax.ts.
//
// The call syntax is node-llama-cpp's ChatWrapper settings.functions.call (prefix, paramsPrefix, suffix) and
// parallelism.call.betweenCalls; a model without a template gets PLAIN_CALL_SYNTAX (Hermes/Qwen style, described in
// its plain-text prompt). One call is `prefix NAME paramsPrefix ARGS suffix`, ARGS a JSON document. What a family's
// model writes beyond the wrapper's one spelling is data (CALL_QUIRKS: Harmony's header variants).
//   forced (`required` / a name): the whole output is under CALLS grammar: `prefix call (betweenCalls prefix call)*`
//     (at most MAX_PARALLEL_CALLS calls; exactly one with parallel_tool_calls false, or a named choice);
//   auto: free text (no grammar) until the output contains `prefix`, then the CALL grammar (NAME alternatives,
//     paramsPrefix, the tool's parameters grammar, suffix) until the suffix, then free text again.
// Invariants: ARGS under a grammar are valid against the tool's parameters (jsonSchema.ts refuses what cannot be
// enforced, param `tools[i].parameters…`); the arguments are emitted as exactly the characters the model produced, so
// re-rendering (syntax + delivered arguments) reproduces the output and a grammar state can be advanced over it; a
// callId is chosen when the call's name is complete and never changes (kept across a resume).
//
// What onText gets for a call: one piece with text '' on the call's channel as soon as its name is known (it carries the
// tokens of the prefix and name), then the arguments' text pieces on that channel; the tokens of the suffix and the
// separator follow on the next piece of any channel (or on a last '' piece on the call's channel when the output ends
// there). A call ends when a piece of another channel (or callId) arrives or the generation ends.

import * as crypto from 'node:crypto';
import type { ChatWrapper, Llama, LlamaGrammar, LlamaText } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { OutputChannel, OutputSegment, TokenLogprob, ToolDefinition } from '../../runtime/backend';
import { RequestRefusedError } from '../../runtime/backend';
import { GrammarLru, parseGrammar } from './grammar';
import { grammarCompiler } from './grammarCompiler';
import { JSON_OBJECT_SCHEMA, translateJsonSchema } from './jsonSchema';
import type { ThoughtSyntax } from './thoughtSyntax';

/** At most this many calls in one forced parallel output (a noise model would otherwise chain calls to the limit). */
export const MAX_PARALLEL_CALLS = 8;

export interface CallSyntax {
  prefix: string;
  paramsPrefix: string;
  suffix: string;
  betweenCalls: string;
  /**
   * Every spelling the model may write between the name and the arguments (the grammar admits each; the first found
   * ends the name). paramsPrefix is the one written back on resume. Absent: paramsPrefix only.
   */
  paramsPrefixes?: readonly string[];
  /** Written before the prefix on resume: the header of the message the call is (Harmony's commentary channel). */
  header?: string;
  /**
   * The suffix is an end-of-generation token of the vocabulary (Harmony's `<|call|>`; set by outputPlan.ts): the model
   * ends the call by ending the generation, so the grammar ends at the arguments and a generation holds one call.
   */
  endsGeneration?: boolean;
}

/** The syntax of template-less models (described in their plain-text prompt, prompt.ts). */
export const PLAIN_CALL_SYNTAX: CallSyntax = {
  prefix: '<tool_call>\n{"name": "',
  paramsPrefix: '", "arguments": ',
  suffix: '}\n</tool_call>',
  betweenCalls: '\n',
};

const textOf = (t: unknown): string => (t == null ? '' : typeof t === 'string' ? t : String(t as LlamaText));

/**
 * Harmony (gpt-oss; openai/harmony): a call is a message of its own, its recipient in the header, before or after the
 * channel: `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>` (what
 * gpt-oss writes), `<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>…` (OpenAI's template),
 * with or without the `<|constrain|>json` content type; node-llama-cpp's HarmonyChatWrapper has the one spelling
 * ` to=functions.` NAME `<|constrain|>json<|message|>`. So the prefix stays ` to=functions.` (the text before it,
 * `<|start|>assistant` and `<|channel|>commentary`, is message syntax the splitter drops: thoughtSyntax.ts), and every
 * header end the model may write after the name is a params prefix. `<|call|>` ends the generation (llama.cpp's
 * gpt-oss rule), so several calls of a turn are several generations, each resumed after the results.
 */
const HARMONY_PARAMS_PREFIXES: readonly string[] = ['', '<|channel|>commentary'].flatMap((channel) =>
  ['<|constrain|>json', ' <|constrain|>json', ' json', ''].map((type) => `${channel}${type}<|message|>`),
);

/** What a family's model writes beyond its wrapper's settings, by node-llama-cpp's wrapperName. */
const CALL_QUIRKS: Readonly<Record<string, Partial<CallSyntax>>> = {
  Harmony: { paramsPrefixes: HARMONY_PARAMS_PREFIXES, header: '<|channel|>commentary' },
};

/** The call syntax of a chat wrapper (its settings.functions and its family's quirks), or the plain one without a wrapper. */
export function callSyntaxOf(wrapper: ChatWrapper | undefined): CallSyntax {
  if (!wrapper) return PLAIN_CALL_SYNTAX;
  const f = wrapper.settings.functions;
  const syntax: CallSyntax = {
    prefix: textOf(f.call.prefix),
    paramsPrefix: textOf(f.call.paramsPrefix),
    suffix: textOf(f.call.suffix),
    betweenCalls: textOf(f.parallelism?.call.betweenCalls) || '\n',
    ...(CALL_QUIRKS[wrapper.wrapperName] ?? {}),
  };
  if (syntax.paramsPrefixes && !syntax.paramsPrefixes.includes(syntax.paramsPrefix)) {
    syntax.paramsPrefixes = [syntax.paramsPrefix, ...syntax.paramsPrefixes];
  }
  return syntax;
}

/** The params prefixes the model may write (paramsPrefix first). */
export function paramsPrefixesOf(syntax: CallSyntax): readonly string[] {
  return syntax.paramsPrefixes?.length ? syntax.paramsPrefixes : [syntax.paramsPrefix];
}

/** node-llama-cpp schema of each tool's arguments (RequestRefusedError naming `tools[i].parameters…`). */
export function toolSchemas(tools: readonly ToolDefinition[]): Record<string, unknown>[] {
  const names = new Set<string>();
  return tools.map((t, i) => {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(t.name)) {
      throw new RequestRefusedError('invalid_request', `Invalid tool name '${t.name}': 1–64 of A-Z, a-z, 0-9, '_', '.', '-'.`, `tools[${i}].name`);
    }
    if (names.has(t.name)) throw new RequestRefusedError('invalid_request', `Duplicate tool name '${t.name}'.`, `tools[${i}].name`);
    names.add(t.name);
    return t.parameters === undefined || Object.keys(t.parameters).length === 0
      ? { ...JSON_OBJECT_SCHEMA }
      : translateJsonSchema(t.parameters, `tools[${i}].parameters`);
  });
}

/** A GBNF string literal. */
const lit = (s: string) => JSON.stringify(s);

/**
 * A node-llama-cpp JSON-schema grammar as rules prefixed with `ns`, its root renamed `ns-root` and without the
 * end-of-document newlines (the call's suffix follows instead).
 */
export function namespaceGrammar(gbnf: string, ns: string): string {
  const lines = gbnf.split('\n').filter((l) => l.trim() !== '');
  const names = new Set(lines.map((l) => l.slice(0, l.indexOf(' ::= '))));
  const out: string[] = [];
  for (const line of lines) {
    const at = line.indexOf(' ::= ');
    const name = line.slice(0, at);
    let body = line.slice(at + 5);
    if (name === 'root') {
      const end = ' "\\n\\n\\n\\n" [\\n]*';
      if (!body.endsWith(end)) throw new Error('unexpected root rule in the JSON grammar');
      body = body.slice(0, -end.length);
    }
    out.push(`${ns}-${name} ::= ${renameRules(body, names, ns)}`);
  }
  return out.join('\n');
}

function renameRules(body: string, names: ReadonlySet<string>, ns: string): string {
  let out = '';
  let i = 0;
  while (i < body.length) {
    const c = body[i]!;
    if (c === '"' || c === '[') {
      const close = c === '"' ? '"' : ']';
      let j = i + 1;
      while (j < body.length && body[j] !== close) j += body[j] === '\\' ? 2 : 1;
      out += body.slice(i, j + 1);
      i = j + 1;
    } else if (/[A-Za-z]/.test(c)) {
      let j = i;
      while (j < body.length && /[A-Za-z0-9-]/.test(body[j]!)) j++;
      const word = body.slice(i, j);
      out += names.has(word) ? `${ns}-${word}` : word;
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

export type CallMode = 'forced' | 'auto';

/**
 * The GBNF for calls. forced: the whole output (`prefix` first); auto: what follows a `prefix` the model wrote.
 * `argsGrammars` are node-llama-cpp's grammars of toolSchemas, hardened by the grammar worker (same order as `names`).
 */
export function callsGrammar(
  syntax: CallSyntax,
  names: readonly string[],
  argsGrammars: readonly string[],
  mode: CallMode,
  maxCalls: number,
): string {
  const rules = argsGrammars.map((g, i) => namespaceGrammar(g, `t${i}`));
  // A suffix that ends the generation is not written under the grammar: the grammar ends, the model ends the output.
  const suffix = syntax.endsGeneration ? '' : ` ${lit(syntax.suffix)}`;
  const calls = names.map((n, i) => `${lit(n)} params-prefix t${i}-root${suffix}`);
  const call = `call ::= ${calls.map((c) => `(${c})`).join(' | ')}`;
  const paramsPrefix = `params-prefix ::= ${paramsPrefixesOf(syntax).map(lit).join(' | ')}`;
  let root: string;
  if (mode === 'auto') root = 'root ::= call';
  else {
    const most = syntax.endsGeneration ? 1 : maxCalls;
    const more = most > 1 ? ` (${lit(syntax.betweenCalls + syntax.prefix)} call){0,${most - 1}}` : '';
    root = `root ::= ${lit(syntax.prefix)} call${more}`;
  }
  return [root, call, paramsPrefix, ...rules].join('\n');
}

/** Compiled call grammars per tool set (per Llama instance), a few kept. */
export class CallGrammarCache {
  private readonly grammars = new GrammarLru(16);
  constructor(private readonly llama: Llama) {}

  get(syntax: CallSyntax, tools: readonly ToolDefinition[], mode: CallMode, maxCalls: number): Promise<LlamaGrammar> {
    const schemas = toolSchemas(tools);
    const key = JSON.stringify([syntax, tools.map((t) => t.name), schemas, mode, maxCalls]);
    return this.grammars.get(key, async () => {
      // Each tool's arguments grammar is written (and hardened) in the grammar worker; the call grammar joins them.
      const text = Promise.all(schemas.map((s) => grammarCompiler().compile(s))).then((args) =>
        callsGrammar(
          syntax,
          tools.map((t) => t.name),
          args,
          mode,
          maxCalls,
        ),
      );
      return parseGrammar(this.llama, text);
    });
  }
}

/** Tracks where a JSON document being written stands (for the end of a call's arguments). */
export class JsonScanner {
  private depth = 0;
  private inString = false;
  private escape = false;
  private started = false;
  done = false;

  /** Feeds text; returns how many characters belong to the document (the rest follows it). */
  feed(text: string): number {
    for (let i = 0; i < text.length; i++) {
      if (this.done) return i;
      const c = text[i]!;
      if (this.inString) {
        if (this.escape) this.escape = false;
        else if (c === '\\') this.escape = true;
        else if (c === '"') this.inString = false;
        continue;
      }
      if (c === '"') this.inString = true;
      else if (c === '{' || c === '[') {
        this.depth++;
        this.started = true;
      } else if (c === '}' || c === ']') {
        this.depth--;
        if (this.depth === 0 && this.started) this.done = true;
      }
    }
    return text.length;
  }
}

export interface ChannelPiece {
  text: string;
  tokens: number;
  logprobs?: TokenLogprob[];
  channel?: OutputChannel;
}

type State =
  /** `lead`: whitespace here is syntax (it follows a thought delimiter), until the first other character. */
  | { kind: 'text'; lead?: boolean }
  | { kind: 'thought'; lead?: boolean }
  | { kind: 'literal'; rest: string; then: 'name' }
  | { kind: 'name'; buf: string }
  | { kind: 'args'; scanner: JsonScanner }
  | { kind: 'suffix'; rest: number }
  | { kind: 'between' }
  | { kind: 'done' };

export interface SplitterOptions {
  mode: CallMode | 'none';
  syntax: CallSyntax;
  thought?: ThoughtSyntax;
  /**
   * auto: the call grammar's state is needed (a fresh one per call). `written`: text of the call the model already
   * wrote after the prefix, in the token that ended it (gpt-oss writes ` to=functions.get_weather` as `functions`,
   * `.get`, `_weather`): the grammar starts past it.
   */
  onCallGrammar?: (active: boolean, written?: string) => void;
  /** At most one call (parallel_tool_calls false, or a named choice). */
  single: boolean;
  newCallId?: () => string;
}

export const newCallId = () => `call_${crypto.randomBytes(12).toString('hex')}`;

/**
 * Splits raw output text into channel pieces. Tokens (and log-probabilities) of text that is syntax, not content, are
 * carried to the next piece emitted; `finish` emits what is left.
 */
export class OutputSplitter {
  private state: State;
  /** Text that may be the start of a marker (call or thought prefix), held back in text/thought states. */
  private held = '';
  private pendingTokens = 0;
  private pendingLogprobs: TokenLogprob[] = [];
  private call?: { callId: string; name: string };
  private lastChannel?: OutputChannel;
  /** A thought opened right after another: its text starts a new paragraph of the same reasoning. */
  private joinThought = false;
  /** Calls completed. */
  calls = 0;

  constructor(private readonly o: SplitterOptions) {
    this.state = this.initialState();
  }

  private initialState(): State {
    if (this.o.mode === 'forced') return { kind: 'literal', rest: this.o.syntax.prefix, then: 'name' };
    return this.o.thought?.openOnStart ? { kind: 'thought', lead: true } : { kind: 'text' };
  }

  /** The thought delimiters as matched (without the whitespace at their ends), and the answer's own syntax. */
  private get marks(): { open: string; close: string; syntax: readonly string[] } | undefined {
    const t = this.o.thought;
    if (!t) return undefined;
    return { open: t.prefix.trim(), close: t.suffix.trim(), syntax: t.answerSyntax ?? [] };
  }

  /** True once no more output may follow (a single call is complete). */
  get done(): boolean {
    return this.state.kind === 'done';
  }

  /** True while output goes into a thought segment. */
  get inThought(): boolean {
    return this.state.kind === 'thought';
  }

  /** True while output goes into a call (auto: the call grammar applies). */
  get inCall(): boolean {
    const k = this.state.kind;
    return k === 'name' || k === 'args' || k === 'suffix';
  }

  push(piece: { text: string; tokens: number; logprobs?: TokenLogprob[] }): ChannelPiece[] {
    this.pendingTokens += piece.tokens;
    if (piece.logprobs) this.pendingLogprobs.push(...piece.logprobs);
    const out: ChannelPiece[] = [];
    this.consume(piece.text, out);
    return out;
  }

  /** The generation ended: held text and carried tokens go out. */
  finish(): ChannelPiece[] {
    const out: ChannelPiece[] = [];
    if (this.held) {
      let held = this.held;
      this.held = '';
      // A whole marker held in case a longer one followed (Harmony's `<|channel|>commentary`) is still syntax.
      if (this.state.kind === 'text') for (const m of this.marks?.syntax ?? []) if (held.startsWith(m)) held = held.slice(m.length);
      this.emit(out, held, this.state.kind === 'thought' ? { kind: 'reasoning' } : undefined);
    }
    if (this.pendingTokens > 0) this.emit(out, '', this.call ? this.channel() : this.lastChannel);
    return out;
  }

  private channel(): OutputChannel {
    return { kind: 'function_call', callId: this.call!.callId, name: this.call!.name };
  }

  private emit(out: ChannelPiece[], text: string, channel: OutputChannel | undefined): void {
    if (!text && this.pendingTokens === 0) return;
    if (text && this.joinThought) {
      if (channel?.kind === 'reasoning') text = `\n\n${text}`;
      this.joinThought = false;
    }
    const p: ChannelPiece = { text, tokens: this.pendingTokens };
    if (!channel && this.pendingLogprobs.length) p.logprobs = this.pendingLogprobs;
    if (channel) p.channel = channel;
    this.pendingTokens = 0;
    this.pendingLogprobs = [];
    this.lastChannel = channel;
    out.push(p);
  }

  /** Longest end of `s` that is a proper prefix of `marker`. */
  private static partial(s: string, marker: string): number {
    for (let n = Math.min(s.length, marker.length - 1); n > 0; n--) if (marker.startsWith(s.slice(-n))) return n;
    return 0;
  }

  private consume(text: string, out: ChannelPiece[]): void {
    let rest = text;
    while (rest.length > 0) {
      const s = this.state;
      switch (s.kind) {
        case 'done':
          return;
        case 'text':
        case 'thought': {
          const inThought = s.kind === 'thought';
          let all = this.held + rest;
          rest = '';
          this.held = '';
          if (s.lead) {
            // Whitespace after a delimiter: syntax (its tokens go with the next piece).
            all = all.replace(/^\s+/, '');
            if (!all) break;
            s.lead = false;
          }
          const marks = this.marks;
          const markers: Array<[string, 'call' | 'thought-open' | 'thought-close' | 'syntax']> = [];
          if (inThought) markers.push([marks!.close, 'thought-close']);
          else {
            if (this.o.mode === 'auto') markers.push([this.o.syntax.prefix, 'call']);
            if (marks?.open) markers.push([marks.open, 'thought-open']);
            for (const m of marks?.syntax ?? []) markers.push([m, 'syntax']);
          }
          let best: { at: number; marker: string; what: string } | undefined;
          for (const [m, what] of markers) {
            const at = all.indexOf(m);
            if (at >= 0 && (!best || at < best.at || (at === best.at && m.length > best.marker.length))) best = { at, marker: m, what };
          }
          const channel: OutputChannel | undefined = inThought ? { kind: 'reasoning' } : undefined;
          // A marker that begins a longer one (Harmony's `<|channel|>analysis` and `<|channel|>analysis<|message|>`):
          // which one it is shows once the text after it is known.
          const from = best?.at ?? 0;
          const tail = all.slice(from);
          if (best && markers.some(([m]) => m.length > tail.length && m.startsWith(tail))) {
            if (from > 0) this.emit(out, best.what === 'thought-close' ? all.slice(0, from).trimEnd() : all.slice(0, from), channel);
            this.held = tail;
            break;
          }
          if (!best) {
            let keep = Math.max(0, ...markers.map(([m]) => OutputSplitter.partial(all, m)));
            // In a thought, whitespace may precede the closing delimiter: held until it is known not to.
            if (inThought) while (keep < all.length && /\s/.test(all[all.length - keep - 1]!)) keep++;
            const now = all.slice(0, all.length - keep);
            this.held = all.slice(all.length - keep);
            if (now) this.emit(out, now, channel);
            break;
          }
          const before = best.what === 'thought-close' ? all.slice(0, best.at).trimEnd() : all.slice(0, best.at);
          if (before) this.emit(out, before, channel);
          rest = all.slice(best.at + best.marker.length);
          if (best.what === 'call') {
            this.state = { kind: 'name', buf: '' };
            this.o.onCallGrammar?.(true, rest);
          } else if (best.what === 'thought-open') {
            this.state = { kind: 'thought', lead: true };
            // Another thought right after one (Harmony: two analysis messages) goes on the same reasoning, a
            // paragraph apart.
            this.joinThought = this.lastChannel?.kind === 'reasoning';
          } else if (best.what === 'thought-close') this.state = { kind: 'text', lead: true };
          break;
        }
        case 'literal': {
          const n = Math.min(s.rest.length, rest.length);
          s.rest = s.rest.slice(n);
          rest = rest.slice(n);
          if (!s.rest) this.state = { kind: 'name', buf: '' };
          break;
        }
        case 'name': {
          s.buf += rest;
          rest = '';
          // The first params prefix to start ends the name (the longest where two start there).
          let found: { at: number; length: number } | undefined;
          for (const p of paramsPrefixesOf(this.o.syntax)) {
            const at = s.buf.indexOf(p);
            if (at >= 0 && (!found || at < found.at || (at === found.at && p.length > found.length))) found = { at, length: p.length };
          }
          if (!found) break;
          const { at } = found;
          const name = s.buf.slice(0, at);
          rest = s.buf.slice(at + found.length);
          this.call = { callId: (this.o.newCallId ?? newCallId)(), name };
          this.emit(out, '', this.channel());
          this.state = { kind: 'args', scanner: new JsonScanner() };
          break;
        }
        case 'args': {
          const n = s.scanner.feed(rest);
          if (n > 0) this.emit(out, rest.slice(0, n), this.channel());
          rest = rest.slice(n);
          if (s.scanner.done) this.state = { kind: 'suffix', rest: this.o.syntax.suffix.length };
          break;
        }
        case 'suffix': {
          // The suffix as far as the model wrote it; anything else ends the call there (a suffix that ends the
          // generation is not written: another end-of-generation token may come instead, yielded as text).
          const suffix = this.o.syntax.suffix;
          let n = 0;
          while (n < rest.length && s.rest > 0 && rest[n] === suffix[suffix.length - s.rest]) {
            n++;
            s.rest--;
          }
          rest = rest.slice(n);
          if (s.rest === 0 || rest.length > 0) this.endCall();
          break;
        }
        case 'between': {
          // forced: betweenCalls + prefix (the grammar admits nothing else).
          this.state = { kind: 'literal', rest: this.o.syntax.betweenCalls + this.o.syntax.prefix, then: 'name' };
          break;
        }
      }
    }
  }

  private endCall(): void {
    this.calls++;
    if (this.o.mode === 'auto') this.o.onCallGrammar?.(false);
    if (this.o.single) this.state = { kind: 'done' };
    else this.state = this.o.mode === 'forced' ? { kind: 'between' } : { kind: 'text' };
  }

  /**
   * Resume: the delivered segments in this syntax (what the model had written), with the splitter brought to where
   * they end (a call half written continues in the same callId). `callText` is the part after the last call prefix
   * when the output ends inside a call (auto: the call grammar is advanced over it); the forced grammar is advanced
   * over all of `text`.
   */
  restore(segments: readonly OutputSegment[]): { text: string; callText?: string } {
    const { syntax } = this.o;
    const thought = this.o.thought;
    let text = '';
    let callText: string | undefined;
    let inThought = thought?.openOnStart === true;
    /** What the rendered output ends with: a message of its own follows it in a family with messages (Harmony). */
    let last: 'none' | 'thought' | 'text' | 'call' = inThought ? 'thought' : 'none';
    /** Starts another message after what was written (Harmony: ends answer text, then a new header). */
    const nextMessage = () => {
      if (last === 'text') text += thought?.messageEnd ?? '';
      if (last !== 'none') text += thought?.messageStart ?? '';
    };
    /** Closes an open thought in the template's form; `answer`: the answer follows (its header, where it has one). */
    const closeThought = (answer: boolean) => {
      if (inThought) text += thought!.suffix + (answer ? (thought!.answerHeader ?? '') : '');
      inThought = false;
    };
    let open: { callId: string; scanner: JsonScanner } | undefined;
    const closeCall = () => {
      if (!open) return;
      text += syntax.suffix;
      open = undefined;
      this.calls++;
    };
    for (const seg of segments) {
      const ch = seg.channel;
      if (ch?.kind === 'function_call') {
        closeThought(false);
        if (open?.callId !== ch.callId) {
          closeCall();
          if (this.o.mode === 'forced') {
            // Exactly what the forced grammar admits (it is advanced over all of the text).
            text += (this.calls > 0 ? syntax.betweenCalls : '') + syntax.prefix;
          } else {
            nextMessage();
            text += (syntax.header ?? '') + syntax.prefix;
          }
          callText = ch.name + syntax.paramsPrefix;
          text += callText;
          open = { callId: ch.callId, scanner: new JsonScanner() };
          this.call = { callId: ch.callId, name: ch.name };
        }
        open.scanner.feed(seg.text);
        text += seg.text;
        callText += seg.text;
        last = 'call';
        continue;
      }
      closeCall();
      callText = undefined;
      if (ch?.kind === 'reasoning') {
        if (!inThought && thought) {
          nextMessage();
          text += thought.prefix;
        }
        inThought = true;
        last = 'thought';
      } else if (inThought) closeThought(!!seg.text);
      else if (seg.text && last === 'call') text += thought?.answerHeader ?? '';
      if (!ch && seg.text) last = 'text';
      text += seg.text;
    }
    if (open && !open.scanner.done) {
      this.state = { kind: 'args', scanner: open.scanner };
      return { text, callText };
    }
    if (open) {
      if (syntax.endsGeneration) {
        // The model ends such a call by ending the generation: the output was complete.
        this.calls++;
        this.state = { kind: 'done' };
        return { text };
      }
      closeCall();
      if (this.o.mode === 'auto') this.o.onCallGrammar?.(false);
      this.state = this.o.single ? { kind: 'done' } : this.o.mode === 'forced' ? { kind: 'between' } : { kind: 'text' };
      return { text };
    }
    this.state = inThought ? { kind: 'thought' } : this.o.mode === 'forced' ? this.initialState() : { kind: 'text' };
    return { text };
  }
}
