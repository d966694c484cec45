"""Checks for tests/test_docs.sh: each program's --help against its docs page.

python3 tests/docs_check.py options BIN_DIR   every option in each --help (and each
    subcommand's help) is on docs/hc-NAME.md and on man/hc-NAME.1, and every option
    in the page's OPTIONS section is in the help; one ok/FAIL line per program.
python3 tests/docs_check.py links             relative links in README.md and docs/
    point at files and headings that exist.
"""
import os
import re
import subprocess
import sys

# program -> argument lists whose help output is the program's interface
HELPS = {
    'hc-gguf': [[]],
    'hc-convert': [[], ['llama2c'], ['hf'], ['synth']],
    'hc-quantize': [[]],
    'hc-profile': [[], ['predictors']],
    'hc-solve': [[]],
    'hc-run': [[]],
}
LONG = re.compile(r'(?<![\w-])--[a-z][a-z0-9-]*')
SHORT = re.compile(r'(?<![\w-])-[a-zA-Z](?![\w-])')


def options(text):
    return set(LONG.findall(text)) | set(SHORT.findall(text))


def section(md, title):
    m = re.search(r'^## ' + title + r'\n(.*?)(?=^## |\Z)', md, re.M | re.S)
    return m.group(1) if m else ''


def check_options(bindir):
    failed = 0
    for prog, calls in HELPS.items():
        helptext = ''
        for args in calls:
            r = subprocess.run([os.path.join(bindir, prog)] + args + ['--help'],
                               capture_output=True, text=True)
            helptext += r.stdout
        page = open('docs/%s.md' % prog).read()
        man = open('man/%s.1' % prog).read().replace('\\-', '-')
        in_help = options(helptext)
        # options named in backticks in the OPTIONS section: `-m`, `--model FILE`
        in_page = set()
        for tok in re.findall(r'`([^`]*)`', section(page, 'OPTIONS')):
            in_page |= {o for o in options(tok) if tok.startswith(o)}
        problems = []
        missing_page = sorted(o for o in in_help if not re.search(r'(?<![\w-])' + re.escape(o) + r'(?![\w-])', page))
        missing_man = sorted(o for o in in_help if not re.search(r'(?<![\w-])' + re.escape(o) + r'(?![\w-])', man))
        missing_help = sorted(in_page - in_help)
        sections = [s for s in ('NAME', 'SYNOPSIS', 'DESCRIPTION', 'OPTIONS', 'EXIT STATUS', 'FILES', 'EXAMPLES')
                    if not re.search(r'^## ' + s + r'$', page, re.M)]
        if missing_page:
            problems.append('in --help but not on docs/%s.md: %s' % (prog, ' '.join(missing_page)))
        if missing_man:
            problems.append('in --help but not in man/%s.1 (make man): %s' % (prog, ' '.join(missing_man)))
        if missing_help:
            problems.append('on the page\'s OPTIONS but not in --help: %s' % ' '.join(missing_help))
        if sections:
            problems.append('page lacks sections: %s' % ', '.join(sections))
        if len(in_help) < 3:
            problems.append('found only %d options in --help' % len(in_help))
        if problems:
            print('FAIL options_%s: %s' % (prog, '; '.join(problems)))
            failed = 1
        else:
            print('ok options_%s (%d options)' % (prog, len(in_help)))
    return failed


def slug(title):
    return re.sub(r'[^\w\- ]', '', title.strip().lower()).replace(' ', '-')


def check_links():
    files = ['README.md'] + sorted(os.path.join(r, f) for r, _, fs in os.walk('docs')
                                   for f in fs if f.endswith('.md'))
    bad = []
    for f in files:
        for link in re.findall(r'\]\(([^)\s]+)\)', open(f).read()):
            if re.match(r'[a-z]+:', link):
                continue
            path, _, anchor = link.partition('#')
            target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(target):
                bad.append('%s: %s (no such file)' % (f, link))
            elif anchor and anchor not in [slug(h) for h in
                                           re.findall(r'^#+ (.*)$', open(target).read(), re.M)]:
                bad.append('%s: %s (no such heading)' % (f, link))
    if bad:
        print('FAIL links: ' + '; '.join(bad))
        return 1
    print('ok links (%d files)' % len(files))
    return 0


if __name__ == '__main__':
    if sys.argv[1] == 'options':
        sys.exit(check_options(sys.argv[2]))
    sys.exit(check_links())
