import { describe, expect, it } from 'vitest';
import { CATALOGUES, JOB_STATES, type Key, LANGS, langOf, pickLang, stateLabel, translate } from '../src/i18n';

describe('the catalogue', () => {
  it('has every key in both languages, none empty, the same placeholders in each', () => {
    const en = Object.keys(CATALOGUES.en).sort();
    const zh = Object.keys(CATALOGUES.zh).sort();
    expect(zh).toEqual(en);
    for (const key of en as Key[]) {
      for (const lang of LANGS) expect(CATALOGUES[lang][key].trim(), `${lang} ${key}`).not.toBe('');
      const holes = (s: string) => (s.match(/\{\w+\}/g) ?? []).sort();
      expect(holes(CATALOGUES.zh[key]), key).toEqual(holes(CATALOGUES.en[key]));
    }
  });

  it('is translated, not copied: Chinese strings that name UI differ from the English ones', () => {
    const same = (Object.keys(CATALOGUES.en) as Key[]).filter(
      (k) => CATALOGUES.en[k] === CATALOGUES.zh[k] && !['lang.en', 'lang.zh', 'common.none'].includes(k),
    );
    expect(same).toEqual([]);
  });

  it('names every job state in both languages', () => {
    for (const s of JOB_STATES) {
      expect(stateLabel('en', s)).toBe(s);
      expect(stateLabel('zh', s)).not.toBe(s);
    }
    expect(stateLabel('zh', 'Unknown')).toBe('Unknown');
  });

  it('fills placeholders and leaves unknown ones visible', () => {
    expect(translate('en', 'job.title', { id: 7, name: 'resnet' })).toBe('Job 7: resnet');
    expect(translate('zh', 'job.title', { id: 7, name: 'resnet' })).toBe('作业 7：resnet');
    expect(translate('en', 'job.title', { id: 7 })).toBe('Job 7: {name}');
  });
});

describe('choosing the language', () => {
  it('follows the browser, then a stored choice', () => {
    expect(pickLang(null, ['zh-CN', 'en'])).toBe('zh');
    expect(pickLang(null, ['zh_Hans'])).toBe('zh');
    expect(pickLang(null, ['fr-FR', 'en-GB'])).toBe('en');
    expect(pickLang(null, ['fr-FR'])).toBe('en');
    expect(pickLang(null, [])).toBe('en');
    expect(pickLang('en', ['zh-CN'])).toBe('en');
    expect(pickLang('zh', ['en-US'])).toBe('zh');
    expect(pickLang('klingon', ['zh-TW'])).toBe('zh');
    expect(langOf(undefined)).toBeNull();
  });
});
