"""Drives a running tensorfold server with the official `openai` package: python3 openai_client.py BASE_URL MODEL KEY."""

import sys

import openai

base, model, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0)

assert [m.id for m in client.models.list().data] == [model]

c = client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
assert c.choices[0].finish_reason == "length", c
assert c.usage.completion_tokens == 5, c.usage
sha = c.model_extra["tensorfold"]["token_sha"]
text = c.choices[0].text

parts, last = [], None
for chunk in client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0, stream=True,
                                       stream_options={"include_usage": True}, extra_body={"ignore_eos": True}):
    parts.extend(ch.text for ch in chunk.choices)
    last = chunk
assert "".join(parts) == text, (parts, text)
assert last.usage.completion_tokens == 5 and last.model_extra["tensorfold"]["token_sha"] == sha

msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, extra_body={"ignore_eos": True})
assert r.choices[0].message.role == "assistant" and r.usage.completion_tokens == 4, r
content = r.choices[0].message.content

parts, usage = [], None
for chunk in client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, stream=True,
                                            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}):
    parts.extend(ch.delta.content or "" for ch in chunk.choices)
    usage = chunk.usage or usage
assert "".join(parts) == content and usage.completion_tokens == 4

# Logprobs through the client's typed objects, both routes.
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, logprobs=True,
                                   top_logprobs=2, extra_body={"ignore_eos": True})
content_lp = r.choices[0].logprobs.content
assert len(content_lp) == 4 and all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in content_lp), content_lp
assert all(e.top_logprobs[0].logprob == e.logprob for e in content_lp), "greedy picks the most likely token"
c = client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0, logprobs=2,
                              extra_body={"ignore_eos": True})
lp = c.choices[0].logprobs
assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.text_offset) == 5 and lp.text_offset[0] == 0, lp

# Stop strings: the text ends before the first match.
if len(text) > 2:
    stop = text[1:3]
    s = client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0, stop=[stop],
                                  extra_body={"ignore_eos": True})
    assert s.choices[0].text == text[: text.find(stop)] and s.choices[0].finish_reason == "stop", s

for bad in [dict(temperature=-1), dict(n=2), dict(model="nope"), dict(max_tokens=10**9), dict(top_p=3)]:
    args = dict(model=model, prompt="x", max_tokens=2)
    args.update(bad)
    try:
        client.completions.create(**args)
        raise AssertionError(f"accepted {bad}")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["message"], e

try:
    openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError as e:
    assert e.status_code == 401

print("openai client: all checks passed")
