// C++ test workload for the symbolizer: namespaces, templates, methods, lambdas and
// operators, built -O2 -g, so names must be demangled exactly as c++filt prints them.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace canopy_test {

template <typename T> struct Acc {
    T sum{};
    void add(const T &v) { sum += v * v; }
    T get() const { return sum; }
};

class Shape {
  public:
    virtual ~Shape() = default;
    virtual double area() const = 0;
};

class Square : public Shape {
    double s_;

  public:
    explicit Square(double s) : s_(s) {}
    double area() const override { return s_ * s_; }
};

class Circle : public Shape {
    double r_;

  public:
    explicit Circle(double r) : r_(r) {}
    double area() const override { return 3.14159 * r_ * r_; }
};

__attribute__((noinline)) double total_area(const std::vector<Shape *> &v)
{
    double t = 0;
    for (auto *s : v)
        t += s->area();
    return t;
}

template <typename K> __attribute__((noinline)) size_t count_words(const std::vector<K> &w)
{
    std::map<K, int> m;
    for (const auto &x : w)
        m[x]++;
    return m.size();
}

struct Vec {
    double x, y;
    Vec operator+(const Vec &o) const { return {x + o.x, y + o.y}; }
};

} // namespace canopy_test

int main(int argc, char **argv)
{
    using namespace canopy_test;
    std::vector<Shape *> shapes;
    for (int i = 0; i < 100; i++)
        shapes.push_back(i % 2 ? static_cast<Shape *>(new Square(i)) : new Circle(i));
    std::vector<std::string> words;
    for (int i = 0; i < 1000; i++)
        words.push_back(std::to_string(i % 37));
    Acc<long> acc;
    for (int i = 0; i < argc * 1000; i++)
        acc.add(i);
    std::vector<int> ints(500);
    std::generate(ints.begin(), ints.end(), [n = 0]() mutable { return (n * 7919) % 503; });
    std::sort(ints.begin(), ints.end(), [](int a, int b) { return a > b; });
    Vec v{1, 2};
    v = v + Vec{3, 4};
    std::printf("%f %zu %ld %d %f\n", total_area(shapes), count_words(words), acc.get(), ints[0],
                v.x);
    for (auto *s : shapes)
        delete s;
    return 0;
}
